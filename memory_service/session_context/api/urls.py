from django.urls import path

from memory_service.session_context.api.views import SessionContextApi

urlpatterns = [path("context", SessionContextApi.as_view(), name="session-context")]
