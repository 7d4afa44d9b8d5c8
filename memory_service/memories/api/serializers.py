from rest_framework import serializers

from memory_service.memories.models import Confidence, Kind, Priority, Scope


class MemoryOutputSerializer(serializers.Serializer):
    """A memory as every endpoint returns it (the fields of a search item, plus ownership).

    Expects ``context["statuses"]``: memory id → DerivedStatus (see selectors.memory_statuses).
    """

    id = serializers.UUIDField()
    external_id = serializers.CharField()
    kind = serializers.ChoiceField(choices=Kind.choices)
    scope = serializers.ChoiceField(choices=Scope.choices)
    user = serializers.CharField()
    repository = serializers.CharField()
    session = serializers.CharField()
    name = serializers.CharField()
    author = serializers.CharField()
    title = serializers.CharField()
    text = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    metadata = serializers.DictField()
    solved_query = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(allow_null=True)
    priority = serializers.ChoiceField(choices=Priority.choices)
    confidence = serializers.ChoiceField(choices=Confidence.choices)
    lifecycle = serializers.CharField()
    status = serializers.SerializerMethodField()
    annotation = serializers.SerializerMethodField()
    superseded_by = serializers.SerializerMethodField()
    embedding_status = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def _status(self, memory):
        return self.context["statuses"][memory.id]

    def get_status(self, memory) -> str:
        return self._status(memory).status

    def get_annotation(self, memory) -> str:
        return self._status(memory).annotation

    def get_superseded_by(self, memory) -> list[str]:
        return self._status(memory).superseded_by
