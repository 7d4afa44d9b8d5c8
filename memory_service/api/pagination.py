"""Cursor pagination in the API's list shape: ``{"results": [...], "next": <cursor or null>}``."""

from urllib.parse import parse_qs, urlparse

from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from memory_service.exceptions import ValidationError


class ApiCursorPagination(CursorPagination):
    """``limit`` defaults to 50 and may not exceed 200; ``cursor`` is the opaque ``next`` value."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "limit"
    ordering = ("-created_at", "-id")

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

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except Exception as exc:  # DRF raises NotFound for a bad cursor; that is bad input, not 404
            raise ValidationError("'cursor' is not valid.", fields={"cursor": ["Invalid cursor."]}) from exc

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
