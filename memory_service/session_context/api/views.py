from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from memory_service.schema import AGENT
from memory_service.session_context.services import session_context_for
from tenants.identifiers import IDENTIFIER_RE
from tenants.models import Permission


class SessionContextApi(APIView):
    """The session-context digest as markdown (what a SessionStart hook injects)."""

    required_permission = Permission.MEMORY_READ

    class FilterSerializer(serializers.Serializer):
        user = serializers.RegexField(IDENTIFIER_RE, required=False, default="")
        repository = serializers.RegexField(IDENTIFIER_RE, required=False, default="")
        session = serializers.RegexField(IDENTIFIER_RE, required=False, default="")

    @extend_schema(
        operation_id="getSessionContext",
        summary="Get the session context",
        description=(
            "A markdown digest for a user and repository, to read at the start of a session: profile "
            "and preferences, high-priority lessons, the latest lessons and conclusions, current "
            "decisions and the session's notes. Needs `memory:read`."
        ),
        tags=[AGENT],
        parameters=[FilterSerializer],
        responses={(200, "text/markdown"): OpenApiResponse(str)},
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        markdown = session_context_for(principal=request.auth, **filters.validated_data)
        return HttpResponse(markdown, content_type="text/markdown; charset=utf-8")
