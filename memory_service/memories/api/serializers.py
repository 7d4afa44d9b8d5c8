from rest_framework import serializers

from memory_service.api.serializers import StrictSerializer
from memory_service.fields import BoundedCharField
from memory_service.memories.models import Confidence, Kind, Lifecycle, Priority, Scope
from memory_service.memories.services import (
    MAX_RAW_TEXT_CHARS,
    MAX_SOLVED_QUERY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
)
from memory_service.retrieval.render import annotation
from tenants.identifiers import IDENTIFIER_RE, is_identifier


def identifier_field(**kwargs):
    return BoundedCharField(max_length=128, required=False, allow_blank=True, default="", **kwargs)


class SupersedeItemSerializer(StrictSerializer):
    id = serializers.UUIDField()
    partial = serializers.BooleanField(default=False)


def validate_metadata(value):
    if not isinstance(value, dict):
        raise serializers.ValidationError("Expected an object.", code="not_a_dict")
    for key in value:
        if not is_identifier(key):
            raise serializers.ValidationError("Keys must match [A-Za-z0-9._:-]{1,128}.")
    return value


class MemoryInputSerializer(StrictSerializer):
    text = serializers.CharField(max_length=MAX_RAW_TEXT_CHARS, trim_whitespace=False)
    scope = serializers.ChoiceField(
        choices=Scope.choices,
        required=False,
        help_text="Where it belongs. Default by kind: `preference` and `profile` go to the user scope "
        "(the token's user), every other kind to the repository scope.",
    )
    kind = serializers.ChoiceField(choices=Kind.choices, default=Kind.NOTE)
    user = identifier_field()
    repository = identifier_field()
    session = identifier_field()
    priority = serializers.ChoiceField(choices=Priority.choices, default=Priority.NORMAL)
    title = BoundedCharField(max_length=MAX_TITLE_CHARS, required=False, allow_blank=True, default="")
    tags = serializers.ListField(
        child=BoundedCharField(max_length=MAX_TAG_CHARS), max_length=MAX_TAGS, required=False, default=list
    )
    metadata = serializers.DictField(required=False, default=dict, validators=[validate_metadata])
    solved_query = BoundedCharField(max_length=MAX_SOLVED_QUERY_CHARS, required=False, allow_blank=True, default="")
    external_id = serializers.RegexField(IDENTIFIER_RE, required=False, allow_blank=True, default="")
    occurred_at = serializers.DateTimeField(required=False, default=None)
    valid_until = serializers.DateTimeField(required=False, allow_null=True, default=None)
    lifecycle = serializers.ChoiceField(choices=Lifecycle.choices, required=False, allow_blank=True, default="")
    supersedes = serializers.ListField(child=SupersedeItemSerializer(), max_length=20, required=False, default=list)


class MemoryUpdateSerializer(StrictSerializer):
    text = serializers.CharField(max_length=MAX_RAW_TEXT_CHARS, trim_whitespace=False, required=False)
    kind = serializers.ChoiceField(choices=Kind.choices, required=False)
    priority = serializers.ChoiceField(choices=Priority.choices, required=False)
    title = BoundedCharField(max_length=MAX_TITLE_CHARS, required=False, allow_blank=True)
    tags = serializers.ListField(child=BoundedCharField(max_length=MAX_TAG_CHARS), max_length=MAX_TAGS, required=False)
    metadata = serializers.DictField(required=False, validators=[validate_metadata])
    solved_query = BoundedCharField(max_length=MAX_SOLVED_QUERY_CHARS, required=False, allow_blank=True)
    occurred_at = serializers.DateTimeField(required=False)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    lifecycle = serializers.ChoiceField(choices=Lifecycle.choices, required=False, allow_blank=True)


# How every datetime field above shows a value (self.fields would deep-copy all 29 declared fields).
_DATETIME = serializers.DateTimeField()


class MemoryOutputSerializer(serializers.Serializer):
    """A memory as every endpoint returns it: the fields of a search item, plus ownership.

    Expects ``context["statuses"]`` (memory id → DerivedStatus); ``context["scores"]`` and
    ``context["markers"]`` (memory id → value) are filled by search only.
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
    score = serializers.SerializerMethodField()
    markers = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()
    annotation = serializers.SerializerMethodField()
    superseded_by = serializers.SerializerMethodField()
    embedding_status = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)

    # Declared above as CharField or ChoiceField: shown as the stored string.
    _STRINGS = ("external_id", "kind", "scope", "user", "repository", "session", "name", "author", "title", "text",
                "solved_query", "priority", "confidence", "lifecycle", "embedding_status")  # fmt: skip
    _DATETIMES = ("occurred_at", "valid_until", "created_at", "updated_at", "expires_at")

    def to_representation(self, memory) -> dict:
        """What the declared fields give, built directly: DRF's walk through 29 fields per memory
        was a tenth of a search's time. ``tests/memories/test_representation.py`` holds the two
        equal; a new field goes in both places."""
        status = self._status(memory)
        shown = {"id": str(memory.id)}
        shown.update((name, str(getattr(memory, name))) for name in self._STRINGS)
        shown["tags"] = [str(tag) for tag in memory.tags]
        shown["metadata"] = {str(key): value for key, value in memory.metadata.items()}
        for name in self._DATETIMES:
            value = getattr(memory, name)
            shown[name] = None if value is None else _DATETIME.to_representation(value)
        shown["score"] = self.get_score(memory)
        shown["markers"] = self.get_markers(memory)
        shown["status"] = status.status
        shown["annotation"] = annotation(status)
        shown["superseded_by"] = status.superseded_by
        return {name: shown[name] for name in MemoryOutputSerializer._declared_fields}

    def _status(self, memory):
        return self.context["statuses"][memory.id]

    def get_score(self, memory) -> float | None:
        score = self.context.get("scores", {}).get(memory.id)
        return round(score, 4) if score is not None else None

    def get_markers(self, memory) -> list[str]:
        return self.context.get("markers", {}).get(memory.id, [])

    def get_status(self, memory) -> str:
        return self._status(memory).status

    def get_annotation(self, memory) -> str:
        """The status marker as agents read it: one line, replacement titles escaped (``retrieval.render``)."""
        return annotation(self._status(memory))

    def get_superseded_by(self, memory) -> list[str]:
        return self._status(memory).superseded_by


class MemoryWriteOutputSerializer(MemoryOutputSerializer):
    """The schema of a write's response; views build it as ``represent()`` plus ``pii``."""

    pii = serializers.DictField(child=serializers.IntegerField(), help_text="Replacements per entity type")
