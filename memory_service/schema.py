"""How the OpenAPI schema describes what every endpoint shares: the error shape, the list shape,
names for the views' nested serializers, the server it is served from, and the two audiences.

Views describe their own operations with ``extend_schema``: an operationId, a summary and a
description written for whoever wires an agent to the API, one of the tags below, and the success
responses. Docstrings are for the code's readers and never reach the document. The errors any
endpoint can answer are added here in one place, so the schema cannot forget them
(``tests/fuzz/test_schema.py`` checks every response against it).
"""

import re
from http import HTTPStatus

from django.conf import settings
from drf_spectacular import openapi
from drf_spectacular.drainage import get_override
from drf_spectacular.utils import OpenApiResponse, extend_schema_serializer
from rest_framework import serializers

from memory_service.api.pagination import ApiCursorPagination
from memory_service.api.serializers import StrictSerializer


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. `invalid`, `not_found`")
    message = serializers.CharField(help_text="Human-readable; never repeats a submitted value")
    fields = serializers.DictField(help_text="Field name → list of problems (nested for lists and objects)")


@extend_schema_serializer(description="The error shape of every 4xx answer.")
class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def error_response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description)


# The two audiences of the API, one tag each: every operation carries exactly one.
AGENT = "Agent"
ADMIN = "Admin"
TAGS = [
    {
        "name": AGENT,
        "description": (
            "What an agent calls while it works: search before acting, write lessons, conclusions "
            "and decisions, supersede old decisions, read the session context and the decision "
            "index, file AGENTS.md proposals. Needs `memory:read`, `memory:write` or "
            "`proposals:write`. These are the operations to give an agent's tool set."
        ),
    },
    {
        "name": ADMIN,
        "description": (
            "Tenant administration, for people and their scripts: API tokens, promoting memories "
            "to validated, search activity, the audit trail, erasure of a user's data, compliance "
            "exports and AGENTS.md imports. Needs `admin` (exports: `export`). Keep these out of "
            "an agent's tool set."
        ),
    },
]


def add_servers_and_tags(result, generator, request, public):
    """Postprocessing hook: the document names the one server it describes, ``PUBLIC_BASE_URL``
    (read when the document is built, so it follows the setting), and describes its two tags."""
    head = {"openapi": result["openapi"], "info": result["info"]}
    return head | {"servers": [{"url": settings.PUBLIC_BASE_URL.rstrip("/")}], "tags": TAGS} | result


def drop_refused_blank_defaults(result, generator, request, public):
    """Postprocessing hook: an optional identifier defaults to ``""`` on the server (not given), but
    its schema refuses ``""`` (a pattern, a minimum length); a default must be a valid value, so the
    document leaves it out and the field is simply optional."""

    def visit(node):
        if isinstance(node, dict):
            if node.get("default") == "" and (
                node.get("minLength", 0) > 0 or ("pattern" in node and not re.search(node["pattern"], ""))
            ):
                del node["default"]
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(result)
    return result


RETRY_AFTER = {"schema": {"type": "integer"}, "description": "Seconds until the rate-limit window resets"}


class AutoSchema(openapi.AutoSchema):
    def get_serializer_name(self, serializer, direction):
        """``SearchApi.InputSerializer`` → ``SearchInput``: every view nests an ``InputSerializer``,
        and equal names would collapse into one component."""
        outer, _, inner = type(serializer).__qualname__.rpartition(".")
        if outer:
            return outer.removesuffix("Api") + inner.removesuffix("Serializer")
        return super().get_serializer_name(serializer, direction)

    def get_description(self):
        """Empty: an operation's description is the one its ``extend_schema`` gives, never a docstring."""
        return ""

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        # A component is described only by ``extend_schema_serializer(description=…)``, never by
        # the class docstring, which speaks to the code's readers.
        description = get_override(serializer, "description")
        if description:
            schema["description"] = description
        else:
            schema.pop("description", None)
        if direction == "request" and isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False  # unknown fields are refused
        return schema

    def _map_response_type_hint(self, method):
        schema = super()._map_response_type_hint(method)
        schema.pop("description", None)  # a method's docstring, as for classes above
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
        for code, response in responses.items():
            if not response.get("description"):  # a success the view did not word: its status phrase
                response["description"] = HTTPStatus(int(code)).phrase
        return operation
