"""Where a value could be stored — every text column of the database, every key of Redis, the
messages queued for Celery — and how to tell whether a value is there in any disguise.

``leaked`` matches a canary however it was written or re-encoded on its way: lower case,
percent-encoded, JSON- or repr-escaped, HTML-escaped, base64-encoded in Redis, with invisible
characters inserted, in full-width or other-script digits, with look-alike letters, or (for long
numbers) with other separators between its digits.
"""

import base64
import binascii
import functools
import html
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from urllib.parse import unquote_plus

from django.db import connections

#: Invisible characters that are not of category Cf: combining grapheme joiner, Hangul fillers,
#: Khmer inherent vowels, variation selectors (both blocks).
_INVISIBLE_EXTRA = "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0" + "".join(map(chr, range(0xFE00, 0xFE10)))
#: Letters and dots that look like ASCII ones (a few scripts' common look-alikes; NFKC maps the rest).
_CONFUSABLES = {
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T",
    "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S",
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "τ": "t", "υ": "u", "χ": "x",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    "。": ".", "｡": ".", "．": ".", "․": ".", "‧": ".", "・": ".",
}  # fmt: skip
#: Between two digits of a number written with separators: 4111 1111, 090-1234, 1234.5678, 1234/5678.
_DIGIT_RUN = re.compile(r"[0-9](?:[\s.\-/_]{1,3}[0-9]|[0-9])*")
#: A number needs this many digits before its digits alone are compared (fewer would match by chance).
MIN_DIGITS = 9
_ESCAPE = re.compile(r"(?:\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2})+")
_BASE64 = re.compile(rb"[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_\-]{16,}={0,2}")


@functools.cache
def _table() -> dict[int, str | None]:
    """One ``str.translate`` table: invisible characters deleted, decimal digits of every script
    mapped to ASCII, look-alike letters mapped to the letters they imitate."""
    table: dict[int, str | None] = {}
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) == "Cf":
            table[code] = None
        elif code > 0x7F and unicodedata.decimal(char, None) is not None:
            table[code] = str(unicodedata.decimal(char))
    table.update({0xE0100 + i: None for i in range(240)})  # variation selectors supplement
    table.update({ord(char): None for char in _INVISIBLE_EXTRA})
    table.update({ord(char): ascii_char for char, ascii_char in _CONFUSABLES.items()})
    return table


def canonical(text: str) -> str:
    """``text`` as the scan compares it: invisible characters removed, NFKC, digits in ASCII,
    look-alikes replaced, case folded."""
    text = unicodedata.normalize("NFKC", text.translate(_table()))
    return text.translate(_table()).casefold()


def _unescape(text: str) -> str:
    """JSON and Python escapes (``\\u2062``, ``\\ud83d\\ude00``, ``\\U000e0041``, ``\\xe9``) decoded."""

    def decode(match: re.Match) -> str:
        try:
            return (
                match.group()
                .encode("ascii")
                .decode("unicode_escape")
                .encode("utf-16", "surrogatepass")
                .decode("utf-16")
            )
        except UnicodeError:
            return match.group()

    return _ESCAPE.sub(decode, text.replace("\\/", "/"))


def _decodings(text: str) -> list[str]:
    """The ways a stored or logged string may have re-encoded what it was given."""
    url = unquote_plus(text)
    forms = [text, url, _unescape(text), _unescape(url), unquote_plus(_unescape(text)), html.unescape(text)]
    return list(dict.fromkeys(forms))


def _digits(text: str) -> str:
    return re.sub(r"[^0-9]", "", text)


class Haystack:
    """Data prepared once for many canaries: each decoding in canonical form, and its runs of digits."""

    def __init__(self, data: bytes | str):
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        self.forms = [canonical(form) for form in _decodings(text)]
        self.numbers = "|".join(_digits(run) for form in self.forms for run in _DIGIT_RUN.findall(form))

    def holds(self, value: str) -> bool:
        """Whether ``value`` is here in any of its forms."""
        needle = canonical(value)
        if any(needle in form for form in self.forms):
            return True
        digits = _digits(needle)
        return len(digits) >= MIN_DIGITS and digits in self.numbers


def leaked(data: bytes | str | Haystack, canaries: Mapping[str, str] | Iterable[str]) -> list[str]:
    """The canaries found in ``data`` (names for a mapping, values otherwise), in any of the forms
    ``Haystack`` knows: exact, case-folded, decoded, without invisible characters, NFKC, digits of
    any script, look-alike letters; numbers of ``MIN_DIGITS`` digits or more by their digits alone."""
    haystack = data if isinstance(data, Haystack) else Haystack(data)
    named = canaries.items() if isinstance(canaries, Mapping) else ((value, value) for value in canaries)
    return [name for name, value in named if haystack.holds(value)]


def _text_columns(cursor) -> list[tuple[str, str]]:
    cursor.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND data_type IN "
        "('text', 'character varying', 'jsonb', 'json', 'ARRAY', 'tsvector')"
    )
    return cursor.fetchall()


def database_occurrences(needle: str, *, skip: tuple[str, ...] = ()) -> list[str]:
    """Every ``table.column`` holding ``needle`` in any text, varchar, array, json or tsvector column,
    read as the schema owner (past RLS), like a scan of a pg_dump."""
    found = []
    with connections["admin"].cursor() as cursor:
        for table, column in _text_columns(cursor):
            if table in skip:
                continue
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s', [f"%{needle}%"])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


def database_text(*, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """The contents of every text, varchar, array, json or tsvector column as ``{"table.column": text}``,
    read as the schema owner (past RLS): what a pg_dump would show, for ``leaked``."""
    contents = {}
    with connections["admin"].cursor() as cursor:
        for table, column in _text_columns(cursor):
            if table in skip:
                continue
            cursor.execute(f'SELECT string_agg("{column}"::text, E\'\\n\') FROM "{table}"')
            contents[f"{table}.{column}"] = cursor.fetchone()[0] or ""
    return contents


def database_leaks(canaries: Mapping[str, str], *, skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """``{"table.column": [canary names]}`` for every column where ``leaked`` finds a canary."""
    found = {}
    for column, text in database_text(skip=skip).items():
        if names := leaked(text, canaries):
            found[column] = names
    return found


def _redis_values(url: str) -> list[tuple[bytes, bytes]]:
    """(key, value) for every value of one Redis database (strings, list items, hash fields and
    values, set and sorted-set members)."""
    import redis

    client = redis.Redis.from_url(url)
    pairs = []
    for key in client.scan_iter(count=500):
        kind = client.type(key).decode()
        if kind == "string":
            pairs.append((key, client.get(key) or b""))
        elif kind == "list":
            pairs += [(key, item) for item in client.lrange(key, 0, -1)]
        elif kind == "hash":
            for field, value in client.hgetall(key).items():
                pairs += [(key, field), (key, value)]
        elif kind == "set":
            pairs += [(key, member) for member in client.smembers(key)]
        elif kind == "zset":
            pairs += [(key, member) for member in client.zrange(key, 0, -1)]
    return pairs


def _base64_blobs(value: bytes, depth: int = 2) -> list[bytes]:
    """Whatever the base64 runs of ``value`` decode to (standard and URL-safe alphabets), recursively."""
    decoded = []
    for run in _BASE64.findall(value):
        padded = run.rstrip(b"=") + b"=" * (-len(run.rstrip(b"=")) % 4)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                blob = decode(padded)
            except (binascii.Error, ValueError):
                continue
            decoded.append(blob)
            if depth > 1:
                decoded += _base64_blobs(blob, depth - 1)
    return decoded


def redis_dump(url: str) -> bytes:
    """Every key and value of one Redis database, concatenated (strings, lists, hashes, sets, sorted
    sets), followed by whatever base64 in them decodes to (Celery message bodies are base64)."""
    pairs = _redis_values(url)
    keys = list(dict.fromkeys(key for key, _ in pairs))
    values = [value for _, value in pairs]
    decoded = [blob for value in values for blob in _base64_blobs(value)]
    return b"\n".join(keys + values + decoded)


def _message(queue: str, state: str, raw: bytes) -> dict | None:
    """A kombu envelope decoded: task name, id, args, kwargs and their reprs; None if ``raw`` is not one."""
    try:
        envelope = json.loads(raw)
    except ValueError:
        return None
    if state == "unacked" and isinstance(envelope, list) and envelope:
        envelope = envelope[0]  # [message, exchange, routing key]
    if not isinstance(envelope, dict) or "body" not in envelope or "properties" not in envelope:
        return None
    body = envelope["body"]
    if envelope["properties"].get("body_encoding") == "base64":
        body = base64.b64decode(body)
    payload = json.loads(body)
    headers = envelope.get("headers") or {}
    if isinstance(payload, list):  # protocol 2: [args, kwargs, embed]
        args, kwargs = payload[0], payload[1]
    else:  # protocol 1
        args, kwargs = payload.get("args", []), payload.get("kwargs", {})
        headers = headers | {"task": payload.get("task"), "id": payload.get("id")}
    return {
        "queue": queue, "state": state, "task": headers.get("task"), "id": headers.get("id"), "args": args,
        "kwargs": kwargs, "argsrepr": headers.get("argsrepr", ""), "kwargsrepr": headers.get("kwargsrepr", ""),
        "eta": headers.get("eta"),
    }  # fmt: skip


def celery_messages(url: str) -> list[dict]:
    """Every Celery message in the broker's Redis database, decoded: the ones queued (kombu's lists,
    one per queue and priority) and the ones delivered but not yet acknowledged (kombu's ``unacked``
    hash). Each is ``{"queue", "state", "task", "id", "args", "kwargs", "argsrepr", "kwargsrepr", "eta"}``."""
    import redis

    client = redis.Redis.from_url(url)
    messages = []
    for key in client.scan_iter(count=500):
        kind = client.type(key).decode()
        name = key.decode(errors="replace")
        if kind == "list":
            raws = [("queued", item) for item in client.lrange(key, 0, -1)]
        elif kind == "hash" and name == "unacked":
            raws = [("unacked", item) for item in client.hvals(key)]
        else:
            continue
        for state, raw in raws:
            if (message := _message(name, state, raw)) is not None:
                messages.append(message)
    return messages


_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_IDENTIFIER = re.compile(r"[A-Za-z0-9._:-]{0,128}")


def free_text_arguments(message: dict) -> list:
    """The arguments of a Celery message that are not ids: anything but numbers, booleans, None,
    UUIDs and identifier-shaped strings (``[A-Za-z0-9._:-]{0,128}``), lists of those included."""
    found = []

    def check(value) -> None:
        if value is None or isinstance(value, (bool, int, float)):
            return
        if isinstance(value, str) and (_UUID.fullmatch(value) or _IDENTIFIER.fullmatch(value)):
            return
        if isinstance(value, (list, tuple)):
            for item in value:
                check(item)
            return
        found.append(value)

    check(list(message["args"]))
    check(list(message["kwargs"].values()))
    return found
