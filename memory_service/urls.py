from django.contrib import admin
from django.urls import include, path
from drf_spectacular.renderers import OpenApiJsonRenderer2
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from memory_service import health
from memory_service.errors import api_aware_404, api_aware_500

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The same document, as plain application/json, where tool builders (ChatGPT Actions…) look for it.
    path("openapi.json", SpectacularAPIView.as_view(renderer_classes=[OpenApiJsonRenderer2]), name="openapi-json"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/v1/", include("memory_service.api_urls")),
    path("admin/", admin.site.urls),
]

handler404 = api_aware_404
handler500 = api_aware_500
