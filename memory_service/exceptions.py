"""Domain errors and the one error shape of the API.

Every error leaves the service as ``{"error": {"code", "message", "fields"}}``. Messages never
echo submitted values: they may contain PII or secrets.
"""

import logging

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApplicationError(Exception):
    """Base of domain errors raised by services and selectors; views never catch them."""

    code = "error"
    http_status = 400
    default_message = "The request could not be processed."

    def __init__(self, message: str | None = None, *, fields: dict | None = None):
        self.message = message or self.default_message
        self.fields = fields or {}
        super().__init__(self.message)


class ValidationError(ApplicationError):
    code = "invalid"
    http_status = 400
    default_message = "The request is invalid."


class NotAuthenticatedError(ApplicationError):
    code = "not_authenticated"
    http_status = 401
    default_message = "A valid bearer token is required."


class PermissionDeniedError(ApplicationError):
    code = "permission_denied"
    http_status = 403
    default_message = "The token does not allow this operation."


class NotFoundError(ApplicationError):
    """Missing, or belonging to another tenant: the two are indistinguishable on purpose."""

    code = "not_found"
    http_status = 404
    default_message = "Not found."


class ConflictError(ApplicationError):
    code = "conflict"
    http_status = 409
    default_message = "The request conflicts with the current state."


class PreconditionFailedError(ApplicationError):
    """``If-Match`` names a version that is no longer current."""

    code = "precondition_failed"
    http_status = 412
    default_message = "The resource changed since you read it."


class PreconditionRequiredError(ApplicationError):
    """A change that could overwrite someone else's needs ``If-Match``."""

    code = "precondition_required"
    http_status = 428
    default_message = "Send If-Match with the current ETag."


class GoneError(ApplicationError):
    """Existed, and was removed for good (an expired or erased export archive)."""

    code = "gone"
    http_status = 410
    default_message = "This resource is no longer available."


class PayloadTooLargeError(ApplicationError):
    code = "too_large"
    http_status = 413
    default_message = "The request is too large."


class ServiceUnavailableError(ApplicationError):
    """A dependency the request needs (the database) does not answer; retrying later may succeed."""

    code = "unavailable"
    http_status = 503
    default_message = "The service is briefly unavailable; retry shortly."
    retry_after = 5


class RateLimitedError(ApplicationError):
    code = "rate_limited"
    http_status = 429
    default_message = "Too many requests."

    def __init__(self, message: str | None = None, *, retry_after: int = 1):
        super().__init__(message)
        self.retry_after = retry_after


# DRF messages that would repeat the submitted value are replaced by these.
_SAFE_FIELD_MESSAGES = {
    "invalid_choice": "Not a valid choice.",
    "does_not_exist": "No such object.",
    "invalid_pk_value": "No such object.",
    "not_a_list": "Expected a list.",
    "not_a_dict": "Expected an object.",
}


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def error_response(code: str, message: str, status: int, fields: dict | None = None) -> JsonResponse:
    """A plain Django response in the API's error shape (for middleware and URL handlers)."""
    return JsonResponse(error_body(code, message, fields), status=status)


def _field_errors(detail, codes) -> dict | list:
    """Flatten DRF's nested error detail, replacing messages that may echo input."""
    if isinstance(detail, dict):
        return {
            key: _field_errors(value, codes.get(key) if isinstance(codes, dict) else codes)
            for key, value in detail.items()
        }
    if isinstance(detail, list):
        code_list = codes if isinstance(codes, list) else [codes] * len(detail)
        return [_field_errors(item, code) for item, code in zip(detail, code_list, strict=False)]
    return _SAFE_FIELD_MESSAGES.get(codes, str(detail)) if isinstance(codes, str) else str(detail)


def _from_drf(exc: drf_exceptions.APIException) -> tuple[str, str, int, dict]:
    if isinstance(exc, drf_exceptions.ValidationError):
        fields = _field_errors(exc.detail, exc.get_codes())
        if not isinstance(fields, dict):
            fields = {"non_field_errors": fields}
        return "invalid", "The request is invalid.", 400, fields
    if isinstance(exc, drf_exceptions.ParseError):
        return "invalid_json", "The request body is not valid JSON.", 400, {}
    if isinstance(exc, drf_exceptions.UnsupportedMediaType):
        return "unsupported_media_type", "Send the body as application/json.", 415, {}
    if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
        return NotAuthenticatedError.code, NotAuthenticatedError.default_message, 401, {}
    if isinstance(exc, drf_exceptions.PermissionDenied):
        return PermissionDeniedError.code, PermissionDeniedError.default_message, 403, {}
    if isinstance(exc, drf_exceptions.NotFound):
        return NotFoundError.code, NotFoundError.default_message, 404, {}
    if isinstance(exc, drf_exceptions.MethodNotAllowed):
        return "method_not_allowed", "This method is not allowed here.", 405, {}
    if isinstance(exc, drf_exceptions.Throttled):
        return RateLimitedError.code, RateLimitedError.default_message, 429, {}
    return "error", "The request could not be processed.", exc.status_code, {}


def error_for(exc) -> tuple[int, dict, dict] | None:
    """(status, body, headers) for a known error, in the one shape; None for a bug."""
    headers = {}
    if isinstance(exc, Http404):
        exc = NotFoundError()
    elif isinstance(exc, PermissionDenied):
        exc = PermissionDeniedError()
    elif isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable", extra={"error": type(exc).__name__})
        exc = ServiceUnavailableError()

    if isinstance(exc, ApplicationError):
        code, message, status, fields = exc.code, exc.message, exc.http_status, exc.fields
        if isinstance(exc, (RateLimitedError, ServiceUnavailableError)):
            headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, drf_exceptions.APIException):
        code, message, status, fields = _from_drf(exc)
        if isinstance(exc, drf_exceptions.Throttled) and exc.wait is not None:
            headers["Retry-After"] = str(max(1, int(exc.wait + 0.999)))
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="api"'
    else:
        return None
    return status, error_body(code, message, fields), headers


def exception_handler(exc, context):
    """DRF exception handler: render every known error in the one shape; let bugs be 500s."""
    known = error_for(exc)
    if known is None:
        return None  # An unknown exception is a bug: Django's 500 handler answers.
    status, body, headers = known
    return Response(body, status=status, headers=headers)
