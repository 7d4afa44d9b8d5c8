"""Cursor pagination in the API's list shape: ``{"results": [...], "next": <cursor or null>}``."""

from urllib.parse import parse_qs, urlparse

from django.core.exceptions import ImproperlyConfigured
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.response import Response

from audit.services import audit_read_record
from memory_service.exceptions import ValidationError


def _invalid_cursor() -> ValidationError:
    return ValidationError("'cursor' is not valid.", fields={"cursor": ["Invalid cursor."]})


class ApiCursorPagination(CursorPagination):
    """``limit`` defaults to 50 and may not exceed 200; ``cursor`` is the opaque ``next`` value.

    Every ordering starts with a timestamp, so a cursor's position is one: anything else a client
    puts there is a 400 before it reaches a query.
    """

    page_size = 50
    max_page_size = 200
    page_size_query_param = "limit"
    ordering = ("-created_at", "-id")

    def paginate_queryset(self, queryset, request, view=None):
        """The page, recorded in the audit as one read of its ids (``view.audit_read``: the
        resource type and action of what the list hands out; a list that declares none is a bug)."""
        audit_read = getattr(view, "audit_read", None)
        if audit_read is None:
            raise ImproperlyConfigured(f"{type(view).__name__} lists without declaring audit_read.")
        page = super().paginate_queryset(queryset, request, view)
        resource_type, action = audit_read
        audit_read_record(
            principal=request.auth, resource_type=resource_type, action=action,
            resource_ids=[item.pk for item in page], details={"list": True},
        )  # fmt: skip
        return page

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if not raw:  # absent, or `?limit=` (an empty value is not given, as for every filter)
            return self.page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                f"'limit' must be an integer from 1 to {self.max_page_size}.",
                fields={"limit": [f"1-{self.max_page_size}."]},
            )
        return int(raw)

    def decode_cursor(self, request) -> Cursor | None:
        """The cursor of the request, None without one; ValidationError (400) for one we did not
        issue. DRF checks only the encoding and the offset, and answers 404 for those."""
        try:
            cursor = super().decode_cursor(request)
        except NotFound as exc:
            raise _invalid_cursor() from exc
        if cursor is not None and cursor.position is not None:
            try:
                position = parse_datetime(cursor.position)
            except ValueError as exc:  # well-formed but impossible, such as month 13
                raise _invalid_cursor() from exc
            if position is None or position.tzinfo is None:
                raise _invalid_cursor()
        return cursor

    def next_cursor(self) -> str | None:
        url = self.get_next_link()
        if url is None:
            return None
        return parse_qs(urlparse(url).query)[self.cursor_query_param][0]

    def get_paginated_response(self, data):
        return Response({"results": data, "next": self.next_cursor()})

    def get_paginated_response_schema(self, schema):
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {"results": schema, "next": {"type": "string", "nullable": True}},
        }
