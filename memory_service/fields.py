"""Serializer fields shared by every REST endpoint."""

from rest_framework import serializers
from rest_framework.fields import empty


class BoundedCharField(serializers.CharField):
    """A ``CharField`` whose ``max_length`` bounds the value as sent, before its surrounding
    whitespace is trimmed: the ``maxLength`` the OpenAPI document states. (DRF's own field trims
    first, so 50 characters and a leading space passed a limit of 50.)"""

    def run_validation(self, data=empty):
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().run_validation(data)
