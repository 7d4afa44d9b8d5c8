"""REST interface onto export jobs: start (202), watch, download the archive."""

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_service.api.serializers import StrictSerializer
from memory_service.exports.models import ExportStatus
from memory_service.exports.selectors import export_job_get, export_job_read
from memory_service.exports.services import export_job_download, export_job_request
from memory_service.fields import BoundedCharField
from memory_service.schema import ADMIN
from tenants.models import Permission


class ExportOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=ExportStatus.choices)
    progress = serializers.IntegerField(min_value=0, max_value=100)
    user = serializers.CharField(help_text="The exported user; empty for the whole tenant")
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per file of the archive")
    size_bytes = serializers.IntegerField(allow_null=True)
    sha256 = serializers.CharField(help_text="Checksum of the whole archive")
    attempts = serializers.IntegerField()
    error = serializers.CharField(help_text="Error class of a failed export")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True, help_text="When the archive will be deleted")


class ExportCreateApi(APIView):
    """Start a compliance export of the tenant, or of one user's data (``export``)."""

    required_permission = Permission.EXPORT

    @extend_schema_serializer(component_name="ExportStartInput")
    class InputSerializer(StrictSerializer):
        user = BoundedCharField(max_length=128, required=False, allow_blank=True, default="")

    @extend_schema_serializer(component_name="ExportStarted")
    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        status = serializers.ChoiceField(choices=ExportStatus.choices)

    @extend_schema(
        operation_id="startExport",
        summary="Start a compliance export",
        description=(
            "Starts building a zip of the tenant's data (or one user's): memories, proposals, AGENTS.md "
            "versions and audit events, one JSON Lines file each with checksums. 202 with the job's id; "
            "watch it with `getExport`. Needs `export`."
        ),
        tags=[ADMIN],
        request=InputSerializer,
        responses={202: OutputSerializer},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = export_job_request(principal=request.auth, user=serializer.validated_data["user"])
        return Response(self.OutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ExportDetailApi(APIView):
    """Status and progress of an export (``export``); another tenant's id is a 404."""

    required_permission = Permission.EXPORT

    @extend_schema(
        operation_id="getExport",
        summary="Watch a compliance export",
        description=(
            "Status (queued, running, succeeded, failed, expired, erased) and progress 0–100 of an export job, "
            "with the archive's size, checksum and expiry once built. Needs `export`."
        ),
        tags=[ADMIN],
        responses=ExportOutputSerializer,
    )
    def get(self, request, export_id):
        job = export_job_read(principal=request.auth, job_id=export_id)
        return Response(ExportOutputSerializer(job).data)


class ExportDownloadApi(APIView):
    """The archive, streamed (``export``): 409 while not built, 410 once expired or erased."""

    required_permission = Permission.EXPORT

    @extend_schema(
        operation_id="downloadExport",
        summary="Download a compliance export",
        description=(
            "The export's zip archive. 409 while it is not built yet, 410 once it expired or was erased. "
            "Needs `export`."
        ),
        tags=[ADMIN],
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, "the zip archive"),
            409: OpenApiResponse(description="not built yet"),
            410: OpenApiResponse(description="expired or erased"),
        },
    )
    def get(self, request, export_id):
        job = export_job_get(principal=request.auth, job_id=export_id)
        path = export_job_download(principal=request.auth, job=job)
        filename = f"export-{request.auth.tenant.slug}-{job.id}.zip"
        return FileResponse(open(path, "rb"), as_attachment=True, filename=filename, content_type="application/zip")  # noqa: SIM115
