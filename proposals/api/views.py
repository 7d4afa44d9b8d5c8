"""REST interface onto the AGENTS.md and proposal services: validate → call → serialize."""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import Action
from memory_service.api.pagination import ApiCursorPagination
from memory_service.api.serializers import CursorFilterSerializer, StrictSerializer
from memory_service.exceptions import ValidationError
from memory_service.fields import BoundedCharField
from memory_service.parsers import JsonParser
from memory_service.schema import ADMIN, AGENT, error_response
from proposals.models import ProposalStatus
from proposals.selectors import agents_md_current, proposal_get, proposal_list
from proposals.services import agents_md_import, proposal_file
from tenants.identifiers import IDENTIFIER_RE
from tenants.models import Permission
from tenants.services import actor_of


class MarkdownParser(BaseParser):
    """A raw ``text/markdown`` (or ``text/plain``) body, decoded as UTF-8."""

    media_type = "text/*"

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return stream.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError("The body is not valid UTF-8.", fields={"text": ["Not UTF-8."]}) from exc


class AgentsMdVersionSerializer(serializers.Serializer):
    repository = serializers.CharField(source="document.repository")
    version = serializers.IntegerField(source="number")
    etag = serializers.CharField()
    sha256 = serializers.CharField()
    source = serializers.CharField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()


class AgentsMdApi(APIView):
    """``GET`` the current AGENTS.md as markdown with its ETag; ``PUT`` imports a new one
    (``admin``; ``If-Match`` with the current ETag once a document exists)."""

    parser_classes = [MarkdownParser, JsonParser]

    @property
    def required_permission(self):
        return Permission.ADMIN if self.request.method == "PUT" else Permission.MEMORY_READ

    REPOSITORY = OpenApiParameter(
        "repository", {"type": "string", "pattern": IDENTIFIER_RE.pattern}, OpenApiParameter.PATH
    )

    @extend_schema(
        operation_id="getAgentsMd",
        summary="Get a repository's AGENTS.md",
        description=(
            "Returns the repository's current approved AGENTS.md as markdown, with its `ETag` (send it "
            "as `If-None-Match` to get 304 when unchanged). 404 when the repository has none yet. Needs "
            "`memory:read`."
        ),
        tags=[AGENT],
        parameters=[REPOSITORY],
        responses={(200, "text/markdown"): OpenApiResponse(str), 304: None},
    )
    def get(self, request, repository):
        version = agents_md_current(principal=request.auth, repository=repository)
        if version.etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
            response = HttpResponse(status=status.HTTP_304_NOT_MODIFIED)
        else:
            response = HttpResponse(version.text, content_type="text/markdown; charset=utf-8")
        response["ETag"] = version.etag
        response["X-AgentsMd-Version"] = str(version.number)
        return response

    @extend_schema(
        operation_id="importAgentsMd",
        summary="Import a repository's AGENTS.md",
        description=(
            "Makes the body (markdown, or JSON `{text}`) the repository's current AGENTS.md. Once a "
            "document exists, send `If-Match` with its current ETag: 428 without it, 412 when another "
            "version came first. Needs `admin`."
        ),
        tags=[ADMIN],
        request={
            "text/markdown": {"type": "string", "pattern": r"\S"},
            "application/json": {
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string", "pattern": r"\S"}},
            },
        },
        parameters=[REPOSITORY, OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, required=False)],
        responses={
            200: AgentsMdVersionSerializer,
            201: AgentsMdVersionSerializer,
            412: error_response("If-Match names a version that is no longer current"),
            428: error_response("A document exists: send If-Match with its current ETag"),
        },
    )
    def put(self, request, repository):
        text = request.data
        if not request.content_type.startswith("text/"):  # JSON: {"text": "..."}, nothing else
            text = text.get("text") if isinstance(text, dict) else None
        if not isinstance(text, str):
            raise ValidationError("Send the document as text/markdown.", fields={"text": ["Required."]})
        result = agents_md_import(
            tenant=request.auth.tenant,
            actor=actor_of(request.auth),
            repository=repository,
            text=text,
            if_match=request.headers.get("If-Match"),
            principal=request.auth,
        )
        first = result.created and result.version.number == 1
        body = AgentsMdVersionSerializer(result.version).data | {"changed": result.created, "pii": result.pii}
        response = Response(body, status=status.HTTP_201_CREATED if first else status.HTTP_200_OK)
        response["ETag"] = result.version.etag
        return response


class ProposalOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    repository = serializers.CharField()
    section = serializers.CharField()
    addition = serializers.CharField()
    reasoning = serializers.CharField(source="shown_reasoning", help_text="Empty for a filer whose filing merged")
    status = serializers.CharField()
    filed_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()
    version = serializers.IntegerField(source="version.number", allow_null=True, default=None)


class ProposalListApi(APIView):
    """``POST`` files a proposal (``proposals:write``); ``GET`` lists the proposals this token
    filed, with their status (an ``admin`` token sees the tenant's)."""

    audit_read = ("proposal", Action.RETRIEVE)

    class InputSerializer(StrictSerializer):
        repository = BoundedCharField(max_length=128)
        section = BoundedCharField(max_length=200)
        addition = serializers.CharField(max_length=2000, trim_whitespace=False)
        reasoning = serializers.CharField(max_length=4000, trim_whitespace=False)

    class FilterSerializer(CursorFilterSerializer):
        repository = serializers.RegexField(IDENTIFIER_RE, required=False)
        status = serializers.ChoiceField(choices=ProposalStatus.choices, required=False)

    @property
    def required_permission(self):
        return Permission.PROPOSALS_WRITE if self.request.method == "POST" else Permission.MEMORY_READ

    @extend_schema(
        operation_id="listProposals",
        summary="List AGENTS.md proposals",
        description=(
            "Lists the proposals this token filed (an `admin` token: all of the tenant's), newest "
            "first, with their status: pending, approved or rejected. Filter by repository or status. "
            "Needs `memory:read`."
        ),
        tags=[AGENT],
        parameters=[FilterSerializer],
        responses=ProposalOutputSerializer(many=True),
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = ApiCursorPagination()
        queryset = proposal_list(principal=request.auth, filters=filters.validated_data).select_related("version")
        page = paginator.paginate_queryset(queryset, request, self)
        return paginator.get_paginated_response(ProposalOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="createProposal",
        summary="Propose an AGENTS.md addition",
        description=(
            "Files an addition to a section of the repository's AGENTS.md, with the reasoning; a person "
            "approves or rejects it. 201 with status `pending`; 200 when the same addition is already "
            "pending (the filings merge). Needs `proposals:write`."
        ),
        tags=[AGENT],
        request=InputSerializer,
        responses={201: ProposalOutputSerializer, 200: OpenApiResponse(ProposalOutputSerializer, "merged")},
    )
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = proposal_file(principal=request.auth, **data.validated_data)
        body = ProposalOutputSerializer(result.proposal).data | {"merged": not result.created, "pii": result.pii}
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class ProposalDetailApi(APIView):
    """One proposal this token filed (any of the tenant's for an ``admin`` token)."""

    required_permission = Permission.MEMORY_READ

    @extend_schema(
        operation_id="getProposal",
        summary="Read one AGENTS.md proposal",
        description=(
            "Returns one proposal this token filed (an `admin` token: any of the tenant's) with its "
            "status and, once approved, the AGENTS.md version it made. Needs `memory:read`."
        ),
        tags=[AGENT],
        parameters=[OpenApiParameter("proposal_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses=ProposalOutputSerializer,
    )
    def get(self, request, proposal_id):
        return Response(ProposalOutputSerializer(proposal_get(principal=request.auth, proposal_id=proposal_id)).data)
