from django.urls import path

from audit.api.views import AuditEventListApi

urlpatterns = [path("audit", AuditEventListApi.as_view(), name="audit-list")]
