from django.urls import path

from memory_service.erasure.api import views

urlpatterns = [
    path("erasures", views.ErasureCreateApi.as_view(), name="erasure-create"),
]
