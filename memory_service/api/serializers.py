"""Serializers every app's REST interface builds on."""

from rest_framework import serializers

from memory_service.api.pagination import ApiCursorPagination


def _has_json_type(field, value) -> bool:
    """Whether a JSON value has the type the field documents (DRF would turn 5 into "5", "yes" into True)."""
    if value is None:
        return True  # the field's own allow_null decides
    if isinstance(field, serializers.BooleanField):
        return isinstance(value, bool)
    if isinstance(field, serializers.IntegerField):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(field, (serializers.CharField, serializers.UUIDField)):
        return isinstance(value, str)
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        return all(_has_json_type(field.child, item) for item in value)
    return True


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know (a client sending ``type`` for ``kind`` hears about it) and
    values of another JSON type than the field's (no silent coercion of numbers into text)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            wrong = [
                name for name, field in self.fields.items() if name in data and not _has_json_type(field, data[name])
            ]
            if wrong:
                raise serializers.ValidationError({name: ["Wrong type."] for name in wrong})
        value = super().to_internal_value(data)
        # Here rather than in validate(): one serializer can then check many items (run_validation).
        unknown = set(data) - set(self.fields)
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in sorted(unknown)})
        return value


class CursorFilterSerializer(serializers.Serializer):
    """Query parameters of a cursor-paginated list (``ApiCursorPagination``); a list's own filters
    subclass it."""

    limit = serializers.IntegerField(required=False, min_value=1, max_value=ApiCursorPagination.max_page_size)
    cursor = serializers.CharField(required=False)
