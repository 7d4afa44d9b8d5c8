"""Every REST endpoint under /api/v1/, one include per app."""

from django.urls import include, path

urlpatterns = [
    path("", include("tenants.api.urls")),
    path("", include("memory_service.memories.api.urls")),
    path("", include("memory_service.session_context.api.urls")),
    path("", include("audit.api.urls")),
    path("", include("proposals.api.urls")),
    path("", include("memory_service.exports.api.urls")),
    path("", include("memory_service.erasure.api.urls")),
]
