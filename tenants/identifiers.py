"""Users and repositories are opaque identifiers chosen by the client, never free text."""

import re

from memory_service.exceptions import ValidationError

IDENTIFIER_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")  # also the OpenAPI pattern; match with is_identifier


def is_identifier(value) -> bool:
    """Whether ``value`` is an opaque identifier, whole (``$`` alone would also admit a trailing newline)."""
    return isinstance(value, str) and IDENTIFIER_RE.fullmatch(value) is not None


_EMAIL_LIKE_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def validate_identifier(value: str, *, field: str) -> str:
    """Return ``value`` if it is a valid opaque identifier; raise ValidationError naming ``field``.

    An email-looking value is refused with advice: ids must not carry personal data.
    """
    if not isinstance(value, str) or not value:
        raise ValidationError(f"'{field}' is required.", fields={field: ["Required."]})
    if _EMAIL_LIKE_RE.match(value) or "@" in value:
        raise ValidationError(
            f"'{field}' looks like an email address; use an opaque id instead.",
            fields={field: ["Use an opaque id, not an email address."]},
        )
    if not is_identifier(value):
        raise ValidationError(
            f"'{field}' must be 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.",
            fields={field: ["Must match [A-Za-z0-9._:-]{1,128}."]},
        )
    return value
