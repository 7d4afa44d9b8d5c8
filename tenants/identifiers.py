"""Users, repositories, sessions, external ids, note names and metadata keys are opaque identifiers
chosen by the client, never free text.

Identifiers are keys: they are stored, indexed, put in Redis keys, task arguments and log lines as
they are, so they are never masked. An identifier that carries personal data or a secret (a phone
number as a user id, a card number as a repository, an API key as an ``external_id``) is refused
instead, with a 400 naming the field and never echoing the value. The check runs the regex tier
of the masker (every recognizer but the name tier: user ids such as ``alice`` are expected).
"""

import functools
import re
from urllib.parse import unquote

from memory_service.exceptions import ValidationError
from memory_service.pii import REGEX_ENTITIES, MaskingPolicy, get_masker

IDENTIFIER_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")  # also the OpenAPI pattern; match with is_identifier

#: What an identifier is checked for: every type the regex tier detects, secrets included.
IDENTIFIER_POLICY = MaskingPolicy(tenant_id="", entities=frozenset(REGEX_ENTITIES))


def is_identifier(value) -> bool:
    """Whether ``value`` has the shape of an opaque identifier, whole (``$`` alone would also admit a
    trailing newline). Says nothing about personal data: see ``validate_identifier``."""
    return isinstance(value, str) and IDENTIFIER_RE.fullmatch(value) is not None


@functools.lru_cache(maxsize=65536)
def personal_data_in(value: str) -> str | None:
    """The entity type a PII or secret recognizer finds in ``value`` (the first one), or None."""
    detections = get_masker().detect(value, IDENTIFIER_POLICY)
    return detections[0].entity if detections else None


_EMAIL_LIKE_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def validate_identifier(value: str, *, field: str) -> str:
    """Return ``value`` if it is a valid opaque identifier free of personal data; otherwise raise
    ValidationError naming ``field`` (the value is never echoed).
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
    entity = personal_data_in(value)
    if entity is not None:
        raise ValidationError(
            f"'{field}' looks like personal data or a secret ({entity}); use an opaque id instead.",
            fields={field: [f"Must not carry personal data or secrets ({entity})."]},
        )
    return value


def validate_metadata_keys(metadata: dict, *, field: str = "metadata") -> None:
    """Every key of ``metadata``, at any depth, is a valid identifier (400 naming ``field``)."""
    for key, value in metadata.items():
        if not is_identifier(key):
            raise ValidationError(
                f"'{field}' keys must match [A-Za-z0-9._:-]{{1,128}}.", fields={field: ["Invalid key."]}
            )
        entity = personal_data_in(key)
        if entity is not None:
            raise ValidationError(
                f"'{field}' keys must not carry personal data or secrets ({entity}).",
                fields={field: [f"A key carries personal data or a secret ({entity})."]},
            )
        if isinstance(value, dict):
            validate_metadata_keys(value, field=field)


# Path segments that cannot carry personal data: words, and ids this service generates (UUIDs).
_PLAIN_SEGMENT = re.compile(r"[a-z_\-]*|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def loggable_path(path: str) -> str:
    """``path`` with every segment that carries personal data or a secret replaced by ``<redacted>``:
    a refused identifier in a URL never reaches a log line."""
    return "/".join(
        "<redacted>" if not _PLAIN_SEGMENT.fullmatch(segment) and personal_data_in(unquote(segment)[:256]) else segment
        for segment in path.split("/")
    )
