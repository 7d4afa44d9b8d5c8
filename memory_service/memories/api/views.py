from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_service.memories.api.serializers import MemoryOutputSerializer
from memory_service.memories.models import Confidence, Kind, Priority, Scope
from memory_service.memories.selectors import memory_get, memory_list, memory_statuses
from memory_service.pagination import ApiCursorPagination
from tenants.identifiers import IDENTIFIER_RE
from tenants.models import Permission


def _identifier_field():
    return serializers.RegexField(IDENTIFIER_RE, required=False)


class MemoryListApi(APIView):
    required_permission = Permission.MEMORY_READ

    class FilterSerializer(serializers.Serializer):
        scope = serializers.ChoiceField(choices=Scope.choices, required=False)
        kind = serializers.ChoiceField(choices=Kind.choices, required=False)
        confidence = serializers.ChoiceField(choices=Confidence.choices, required=False)
        priority = serializers.ChoiceField(choices=Priority.choices, required=False)
        user = _identifier_field()
        repository = _identifier_field()
        session = _identifier_field()
        tag = serializers.CharField(required=False, max_length=64)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=200)
        cursor = serializers.CharField(required=False)

    @extend_schema(parameters=[FilterSerializer], responses=MemoryOutputSerializer(many=True))
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = ApiCursorPagination()
        page = paginator.paginate_queryset(
            memory_list(token=request.auth, filters=filters.validated_data), request, self
        )
        statuses = memory_statuses(token=request.auth, memories=page)
        data = MemoryOutputSerializer(page, many=True, context={"statuses": statuses}).data
        return paginator.get_paginated_response(data)


class MemoryDetailApi(APIView):
    required_permission = Permission.MEMORY_READ

    @extend_schema(responses=MemoryOutputSerializer)
    def get(self, request, memory_id):
        memory = memory_get(token=request.auth, memory_id=memory_id)
        statuses = memory_statuses(token=request.auth, memories=[memory])
        return Response(MemoryOutputSerializer(memory, context={"statuses": statuses}).data)
