from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from audit.models import Action
from audit.selectors import audit_event_list
from memory_service.api.pagination import ApiCursorPagination
from memory_service.api.serializers import CursorFilterSerializer
from memory_service.fields import BoundedCharField
from memory_service.schema import ADMIN
from tenants.models import Permission


class AuditEventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    at = serializers.DateTimeField()
    actor = serializers.CharField()
    action = serializers.CharField()
    resource_type = serializers.CharField()
    resource_ids = serializers.ListField(child=serializers.CharField())
    details = serializers.DictField()


class AuditPagination(ApiCursorPagination):
    ordering = ("-at", "-id")


class AuditEventListApi(APIView):
    """The tenant's audit events (``admin``), newest first."""

    required_permission = Permission.ADMIN
    audit_read = ("audit_event", Action.AUDIT_EXPORTED)

    class FilterSerializer(CursorFilterSerializer):
        action = serializers.ChoiceField(choices=Action.choices, required=False)
        actor = BoundedCharField(required=False, max_length=200)
        resource_type = BoundedCharField(required=False, max_length=32)
        resource_id = BoundedCharField(required=False, max_length=64)
        since = serializers.DateTimeField(required=False)
        until = serializers.DateTimeField(required=False)

    @extend_schema(
        operation_id="listAuditEvents",
        summary="List audit events",
        description=(
            "The tenant's audit trail, newest first: who did what to which resources, with sizes and "
            "counts but never content; user ids appear as keyed pseudonyms. Filter by action, actor, "
            "resource or time. Needs `admin`."
        ),
        tags=[ADMIN],
        parameters=[FilterSerializer],
        responses=AuditEventOutputSerializer(many=True),
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = AuditPagination()
        page = paginator.paginate_queryset(
            audit_event_list(principal=request.auth, filters=filters.validated_data), request, self
        )
        return paginator.get_paginated_response(AuditEventOutputSerializer(page, many=True).data)
