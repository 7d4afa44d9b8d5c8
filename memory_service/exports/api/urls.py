from django.urls import path

from memory_service.exports.api import views

urlpatterns = [
    path("exports", views.ExportCreateApi.as_view(), name="export-create"),
    path("exports/<str:export_id>", views.ExportDetailApi.as_view(), name="export-detail"),
    path("exports/<str:export_id>/download", views.ExportDownloadApi.as_view(), name="export-download"),
]
