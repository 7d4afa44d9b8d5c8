"""Spans that are never PII: harmless code strings, and labels the masker already wrote.

Code notes are full of numbers that look like phone numbers or IP addresses to a pattern:
versions, commit hashes, UUIDs, ports, timestamps. ``harmless_spans`` finds them so that a
detection lying inside one is dropped. Secrets are never dropped this way (the engine applies
these spans to every other entity type only).

``label_spans`` finds ``<EMAIL_ADDRESS>`` and ``<EMAIL_ADDRESS_1a2b3c4d5e6f>``: a detection that
touches one is dropped, whatever its type, so masking masked text changes nothing.

Both work on normalised text (ASCII digits); boundaries are spelled with ASCII classes because
``\\b`` treats kana and kanji as word characters.
"""

import regex

from memory_service.pii.entities import ENTITY_TYPES

# Separate patterns: one alternation of all of them is eight times slower.
_HARMLESS = tuple(
    regex.compile(pattern)
    for pattern in (
        # Versions: v2.0.1-rc1, 1.26.4, 10.0.19041, numpy==1.26.4, react@18.2.0, nginx:1.25,
        # "version 10.0.19041.1". Minor parts of at most two digits keep 212.555.1234 out.
        r"(?<![A-Za-z0-9_.\-])[vV][0-9]{1,5}(?:\.[0-9]{1,6}){1,3}(?:[\-+][0-9A-Za-z.\-]+)?(?![0-9A-Za-z_]|\.[0-9])",
        r"(?<![A-Za-z0-9_.\-])[0-9]{1,4}\.[0-9]{1,2}\.[0-9]{1,6}(?:[\-+][0-9A-Za-z.\-]+)?(?![0-9A-Za-z_]|\.[0-9])",
        r"(?<=(?:==|>=|<=|~=|!=|\^|~|@|:)[ \t]?)[0-9]{1,4}(?:\.[0-9]{1,6}){1,2}(?![0-9]|\.[0-9])",
        r"(?i:version|ver\.|release|バージョン)[ \t]*[:=]?[ \t]*v?[0-9]{1,5}(?:\.[0-9]{1,6}){1,4}",
        # UUIDs.
        r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z])",
        # Commit hashes and digests: 7-64 lowercase hex digits, at least one a-f and one 0-9 (upper
        # case would swallow IBANs such as DE89370400440532013000).
        r"(?<![0-9A-Za-z_@.\-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}(?![0-9A-Za-z_@\-]|\.[0-9A-Za-z])",
        r"(?<![0-9A-Za-z])0x[0-9a-fA-F]+(?![0-9A-Za-z])",
        # Ports: localhost:3000, :5432, port 8080, ポート5432, docker's -p 8080:80.
        r"(?<![0-9:])(?::[0-9]{1,5})(?![0-9A-Za-z.:])",
        r"(?i:localhost|port|ポート)[ \t:=#]*[0-9]{1,5}(?![0-9])",
        r"(?<![0-9.:])[0-9]{2,5}:[0-9]{2,5}(?![0-9.:])",
        # Loopback, unspecified and netmask addresses, and the private ranges by name (10.0.0.0/8).
        r"(?<![0-9.])(?:127(?:\.[0-9]{1,3}){3}|0\.0\.0\.0|255\.255\.[0-9]{1,3}\.[0-9]{1,3})(?:/[0-9]{1,2})?(?![0-9.])",
        r"(?<![0-9.])(?:10\.0\.0\.0/8|172\.16\.0\.0/12|192\.168\.0\.0/16|169\.254\.0\.0/16|100\.64\.0\.0/10)(?![0-9])",
        r"(?<![0-9A-Fa-f:])::1?(?![0-9A-Fa-f:])",
        # Timestamps and dates: 2024-01-15T10:30:00Z, 2024-01-15 10:30, 2024/01/15, 10:30:45,
        # 2024年1月15日, 10時30分.
        r"(?<![0-9])[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?)?"
        r"(?:Z|[+\-][0-9]{2}:?[0-9]{2})?(?![0-9])",
        r"(?<![0-9])[0-9]{4}/[0-9]{1,2}/[0-9]{1,2}(?:[ T][0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?)?(?![0-9])",
        r"(?<![0-9])[0-9]{8}T[0-9]{6}Z?(?![0-9])",
        r"(?<![0-9:])[0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?![0-9])",
        r"[0-9]{2,4}年[0-9]{1,2}月(?:[0-9]{1,2}日)?|[0-9]{1,2}時[0-9]{1,2}分",
        # Identifiers: CVE-2024-12345, JIRA-1234, #1234, AWS ARNs, git's scp-like remotes.
        r"(?<![0-9A-Za-z])CVE-[0-9]{4}-[0-9]{4,7}(?![0-9])",
        r"(?<![0-9A-Za-z])[A-Z][A-Z0-9]{1,9}-[0-9]{1,6}(?![0-9A-Za-z\-])",
        r"(?<![0-9A-Za-z&])#[0-9]{1,9}(?![0-9])",
        r"arn:aws[a-z\-]*:[a-z0-9\-]*:[a-z0-9\-]*:[0-9]{12}:",
        r"(?<![A-Za-z0-9._%+\-])git@[A-Za-z0-9.\-]+",
    )
)

_LABEL = regex.compile(rf"<(?:{'|'.join(ENTITY_TYPES)})(?:_[0-9a-f]{{12}})?>")


def harmless_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of harmless code strings in normalised ``text``."""
    return [match.span() for pattern in _HARMLESS for match in pattern.finditer(text)]


def label_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of masking labels already in ``text``."""
    return [match.span() for match in _LABEL.finditer(text)]
