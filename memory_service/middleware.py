"""Request logging, the size limit, and the API's answer when the database is down.

None of them ever reads or logs a request body."""

import logging
import time

from django.conf import settings
from django.db import InterfaceError, OperationalError

from memory_service.exceptions import PayloadTooLargeError, error_for, error_response
from tenants.identifiers import loggable_path

logger = logging.getLogger("memory_service.request")


class RequestLogMiddleware:
    """One JSON log line per request: method, path (no query string; a segment carrying personal
    data is redacted), status, duration, client."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        token = getattr(getattr(request, "user", None), "token", None)
        logger.info(
            "request",
            extra={
                "method": request.method,
                "path": loggable_path(request.path),
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                "token": token.prefix if token is not None else None,
                "client": token.name if token is not None else None,
                "tenant": str(token.tenant_id) if token is not None else None,
            },
        )
        return response


class RequestSizeLimitMiddleware:
    """Refuse bodies over MAX_REQUEST_BYTES with 413 before anything parses them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.MAX_REQUEST_BYTES:
            return error_response(
                PayloadTooLargeError.code,
                f"The request body exceeds {settings.MAX_REQUEST_BYTES} bytes.",
                413,
            )
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    """An API request that finds the database down (restarting, unreachable, pool exhausted) gets
    503 with ``Retry-After`` in the one error shape, not a 500; nothing was acknowledged."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not request.path.startswith("/api/") or not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        status, body, headers = error_for(exception)
        response = error_response(body["error"]["code"], body["error"]["message"], status)
        for name, value in headers.items():
            response[name] = value
        return response
