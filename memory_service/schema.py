"""How the OpenAPI schema describes what every endpoint shares: the error shape, the list shape,
and names for the views' nested serializers.

Views describe their own success responses with ``extend_schema``; the errors any endpoint can
answer are added here in one place, so the schema cannot forget them (``tests/fuzz/test_schema.py``
checks every response against it).
"""

from drf_spectacular import openapi
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from memory_service.api.pagination import ApiCursorPagination
from memory_service.api.serializers import StrictSerializer


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. `invalid`, `not_found`")
    message = serializers.CharField(help_text="Human-readable; never repeats a submitted value")
    fields = serializers.DictField(help_text="Field name → list of problems (nested for lists and objects)")


class ErrorSerializer(serializers.Serializer):
    """The one error shape of the API."""

    error = ErrorDetailSerializer()


def error_response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description)


RETRY_AFTER = {"schema": {"type": "integer"}, "description": "Seconds until the rate-limit window resets"}


class AutoSchema(openapi.AutoSchema):
    def get_serializer_name(self, serializer, direction):
        """``SearchApi.InputSerializer`` → ``SearchInput``: every view nests an ``InputSerializer``,
        and equal names would collapse into one component."""
        outer, _, inner = type(serializer).__qualname__.rpartition(".")
        if outer:
            return outer.removesuffix("Api") + inner.removesuffix("Serializer")
        return super().get_serializer_name(serializer, direction)

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False  # unknown fields are refused
        return schema

    def _get_paginator(self):
        # Views paginate by hand (APIView), so every list is {"results", "next"}: say so here.
        return super()._get_paginator() or (ApiCursorPagination() if self.method == "GET" else None)

    def _get_pagination_parameters(self):
        return []  # each list view declares `limit` and `cursor` in its FilterSerializer

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None or not path.startswith("/api/v1/"):
            return operation
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query" and not parameter.get("required"):
                parameter["allowEmptyValue"] = True  # `?user=` is read as not given (HTML form rules)
        errors = {
            401: "Missing, unknown, expired or revoked token",
            403: "The token lacks the permission, or is bound to another user or repository",
            429: "Rate-limited (see `Retry-After`)",
        }
        has_body = "requestBody" in operation
        if has_body or operation.get("parameters"):
            errors[400] = "Invalid input; `fields` names each invalid field"
        if any(parameter["in"] == "path" for parameter in operation.get("parameters", [])):
            errors[404] = "Missing, or another tenant's (indistinguishable on purpose)"
        if has_body:
            errors[413] = "Body over MAX_REQUEST_BYTES, or a field over its documented size"
            errors[415] = "Body in a media type the endpoint does not accept"
        responses = operation.setdefault("responses", {})
        for code, description in sorted(errors.items()):
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(error_response(description), str(code))
        responses["429"].setdefault("headers", {})["Retry-After"] = RETRY_AFTER
        return operation
