"""Checks on raw input that every interface shares: how deep a JSON document may nest and which
characters no field may hold.

REST bodies go through ``memory_service.parsers.JsonParser``, MCP bodies through
``check_json_body`` before the SDK sees them; the services refuse the same characters again
(``check_storable``), so a command or an MCP tool cannot store what a REST request could not.
Errors name the field, never the value.
"""

import json
import re

from memory_service.exceptions import ValidationError

# Containers (objects and arrays) a JSON document may nest, the document itself counting as one.
MAX_JSON_DEPTH = 64

TOO_DEEP = f"JSON may nest at most {MAX_JSON_DEPTH} levels."
LONE_SURROGATE = "Contains a lone surrogate (\\ud800-\\udfff), which is not a character."

# Python's json decoder joins a valid surrogate pair into one character: whatever is left is lone.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# A key is named in an error only when it looks like a field name (client-chosen keys may hold
# personal data).
_FIELD_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _has_lone_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE_RE.search(text) is not None


def unstorable_character(value) -> str | None:
    """Why ``value`` cannot be stored, or None: a NUL character (PostgreSQL stores it neither in
    text nor in jsonb) or a lone surrogate (not encodable as UTF-8), in a string, a list of them or
    the keys and values of a JSON object, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "NUL characters are not allowed."
            if _has_lone_surrogate(item):
                return LONE_SURROGATE
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return None


def check_storable(fields: dict) -> None:
    """Raise ValidationError naming the first of ``fields`` (name → value) whose value holds a
    character that cannot be stored (see ``unstorable_character``)."""
    for name, value in fields.items():
        reason = unstorable_character(value)
        if reason is not None:
            raise ValidationError(f"'{name}' contains a character that cannot be stored.", fields={name: [reason]})


def json_document_problem(document, *, fields_at: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(field, reason) for a parsed JSON document that nests deeper than MAX_JSON_DEPTH or holds
    a lone surrogate in any key or string; None if it has neither.

    ``field`` is the member, of the object that the keys ``fields_at`` lead to from the top (the
    top itself by default), that the problem is in; else ``non_field_errors`` (the problem is
    elsewhere, in a key that does not look like a field name, or in such a key itself).
    """
    # (value, its depth, how many keys of fields_at lead to it or -1 when off that path, its field)
    stack = [(document, 1, 0, "non_field_errors")]
    while stack:
        value, depth, along, field = stack.pop()
        if isinstance(value, str):
            if _has_lone_surrogate(value):
                return field, LONE_SURROGATE
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_JSON_DEPTH:
            return field, TOO_DEEP
        if isinstance(value, list):
            stack.extend((item, depth + 1, -1, field) for item in value)
            continue
        for key, item in value.items():
            if _has_lone_surrogate(key):
                return field, LONE_SURROGATE
            if along == len(fields_at):
                stack.append((item, depth + 1, -1, key if _FIELD_NAME_RE.fullmatch(key) else field))
            elif along >= 0 and key == fields_at[along]:
                stack.append((item, depth + 1, along + 1, field))
            else:
                stack.append((item, depth + 1, -1, field))
    return None


def check_json_document(document, *, fields_at: tuple[str, ...] = ()) -> None:
    """Raise ValidationError naming the field if ``json_document_problem`` finds one."""
    problem = json_document_problem(document, fields_at=fields_at)
    if problem is not None:
        field, reason = problem
        message = TOO_DEEP if reason == TOO_DEEP else "The request holds text that is not valid Unicode."
        raise ValidationError(message, fields={field: [reason]})


def check_json_body(body: bytes, *, fields_at: tuple[str, ...] = ()) -> None:
    """Raise ValidationError if ``body`` is JSON that nests too deep or holds a lone surrogate
    (``json_document_problem`` names the field).

    A body that is not JSON passes: the caller's own parser answers for it.
    """
    try:
        document = json.loads(body)
    except RecursionError as exc:
        raise ValidationError(TOO_DEEP) from exc
    except ValueError:
        return
    check_json_document(document, fields_at=fields_at)
