"""Django-level error pages: JSON in the API's error shape under /api/, HTML elsewhere."""

from django.views import defaults

from memory_service.exceptions import NotFoundError, error_response


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def api_aware_404(request, exception):
    if _is_api(request):
        return error_response(NotFoundError.code, NotFoundError.default_message, 404)
    return defaults.page_not_found(request, exception)


def api_aware_500(request):
    if _is_api(request):
        return error_response("server_error", "An unexpected error occurred; it has been logged.", 500)
    return defaults.server_error(request)
