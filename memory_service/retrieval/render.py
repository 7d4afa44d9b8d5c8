"""Every line the server writes for agents about memories, rendered in one place.

Agents read memories three ways: the ``context`` block of a search (REST and MCP), the
session-context digest (markdown, REST and MCP), and the ``annotation`` string beside each memory
in JSON (search items, listings, the decision index). Anything in them that comes from a memory —
its title, its text, and the titles of the memories that replace it — was written by some agent
with a write token, so it is data and passes through this module:

- ``escape_line`` makes memory text inert *and* one line: markup, backticks and the marker glyphs
  become entities, and every line break or other control character (``\\n``, ``\\r``, ``\\v``,
  ``\\f``, ``\\x85``, U+2028, U+2029, …) becomes a space. Titles, annotations and digest lines
  use it, since there memory text shares a line with text the server writes.
- ``escape_text`` makes memory text inert but keeps its lines, for the body of a fenced item,
  which only the fence's tail ends.
- ``markdown_span`` quotes memory text for the digest, which is markdown: one line in an inline
  code span whose backtick fence nothing in the text can close. Nothing else changes, so a
  placeholder such as ``<EMAIL_ADDRESS>`` reads as written.
- ``annotation`` is the status marker of a memory (``⚠️ superseded → <id> <title>``).
- ``memory_head`` and ``MEMORY_TAIL`` fence one item of the context block; nothing else writes
  ``<memory`` or ``</memory>``.
- ``render_context`` packs the fenced items into a byte budget; ``digest_line`` is one memory's
  line of the digest.

Markers (the head's fields, the annotation line) are written by the server only. In the context
block, memory text can never hold a line break or a raw ``<`` on them; in the digest, it is one
code span on the memory's own line. So ``</memory>``, ``⚠️ superseded``, ``RECENT`` or ``- [`` inside
a memory — or inside the title of a replacement — cannot forge a fence, a line or a marker.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from memory_service.memories.models import Memory
from memory_service.memories.status import DerivedStatus, Replacement, Status

_MARKER_GLYPHS = {"⚠": "&#x26a0;", "△": "&#x25b3;"}
# A run of line breaks and other control characters (Unicode categories Cc, Zl and Zp: every
# character str.splitlines() splits on, and the rest of C0 and C1 such as ESC), with the spaces
# around it.
_BREAKS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_LINE_BREAKS = re.compile(f" *[{_BREAKS}][ {_BREAKS}]*")
_BACKTICKS = re.compile("`+")
ELLIPSIS = "…"
# A text is not shortened below this many bytes (or its whole length) to fit one more item in a
# context block: a text cut to a word or two tells the reader nothing.
MIN_TEXT_BYTES = 64
MEMORY_TAIL = "\n</memory>\n"


def _inert(text: str, *, quote: bool) -> str:
    text = escape(text, quote=quote)
    for glyph, entity in _MARKER_GLYPHS.items():
        text = text.replace(glyph, entity)
    return text


def escape_text(text: str) -> str:
    """Memory text made inert: markup (``<``, ``>``, ``&``, quotes) and marker glyphs become
    entities. Line breaks are kept: for a fenced body only."""
    return _inert(text, quote=True)


def escape_line(text: str) -> str:
    """Memory text made inert and one line, for a line the server writes around it.

    ``<``, ``>``, ``&``, backticks (the digest is markdown) and marker glyphs become entities;
    each run of line breaks and other control characters, with the spaces around it, becomes one
    space, and the ends are trimmed of spaces. Quotes stay: memory text is never put inside an
    attribute. The result holds no ``<``, ``>``, backtick, marker glyph or control character, and
    ``str.splitlines()`` finds one line in it (none if it is empty).
    """
    text = _inert(text, quote=False).replace("`", "&#96;")
    return _LINE_BREAKS.sub(" ", text).strip(" ")


def markdown_span(text: str) -> str:
    """Memory text quoted for a markdown line: one inline code span, or ``""`` if the text is blank.

    Each run of line breaks and other control characters, with the spaces around it, becomes one
    space, as in ``escape_line``; nothing else is changed or encoded, so ``<EMAIL_ADDRESS>`` and
    ``&lt;`` read as written. The fence is one backtick longer than the longest run of backticks in
    the text, so nothing in it closes the span early (a space pads a text that starts or ends with
    a backtick; markdown drops it). Inside a code span markdown reads no markup: no heading, list
    item, link, image, emphasis or HTML. The result is one line (``str.splitlines()``).
    """
    line = _LINE_BREAKS.sub(" ", text).strip(" ")
    if not line:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(line)), default=0) + 1)
    pad = " " if line[0] == "`" or line[-1] == "`" else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def _target(replacement: Replacement, quote: Callable[[str], str]) -> str:
    title = quote(replacement.title or "")
    return f"{replacement.id} {title}" if title else replacement.id


def annotation(status: DerivedStatus, *, quote: Callable[[str], str] = escape_line) -> str:
    """The marker shown to agents for ``status``, one line; empty for a current memory.

    Replacements are named by id, each followed by its title where the reader may read it, quoted
    by ``quote``: ``escape_line`` (the default) for the context block and the JSON ``annotation``
    field, ``markdown_span`` for the digest.
    """
    targets = ", ".join(_target(r, quote) for r in status.replacements)
    return {
        Status.SUPERSEDED: f"⚠️ superseded → {targets}",
        Status.PARTIALLY_SUPERSEDED: f"△ partially superseded → {targets}",
        Status.PROPOSED: "△ proposed (not approved)",
        Status.REJECTED: "⚠️ rejected",
        Status.DEPRECATED: "⚠️ deprecated",
    }.get(status.status, "")


@dataclass(frozen=True)
class ContextItem:
    """One memory as the context block shows it. ``title`` and ``text`` are the memory's own
    (escaped when rendered); the other fields are made by the server."""

    id: str
    kind: str
    scope: str
    date: str
    markers: tuple[str, ...]  # RECENT, HIGH, unreviewed
    status: DerivedStatus
    title: str
    text: str


def memory_head(item: ContextItem) -> str:
    """The fixed part of an item, never cut: the ``<memory <id> <kind> <scope> <date>[ <markers>]>``
    line, the annotation line if the status has one (a current memory has none, so the status
    is not repeated on the first line), and ``# <title>`` if the title is not empty once escaped.
    Each is one line ending in a newline; the fields are written by the server, space-separated."""
    fields = " ".join((item.id, item.kind, item.scope, item.date, *item.markers))
    head = f"<memory {fields}>\n"
    marker = annotation(item.status)
    if marker:
        head += f"{marker}\n"
    title = escape_line(item.title)
    if title:
        head += f"# {title}\n"
    return head


def _utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes, not splitting a character or an entity."""
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    prefix = encoded[:max_bytes].decode(errors="ignore")
    amp = prefix.rfind("&")
    if amp != -1 and ";" not in prefix[amp:]:
        prefix = prefix[:amp]
    return prefix


def render_context(items: list[ContextItem], budget_bytes: int) -> tuple[str, list[str]]:
    """The context block and the ids it includes, at most ``budget_bytes`` of UTF-8.

    Each item is ``memory_head`` + its escaped text + ``MEMORY_TAIL``. Items keep their order.
    The head is never cut. Texts are shortened (ending in ``…``) before anything is dropped, but
    not below MIN_TEXT_BYTES to make room for another item: past that, the last items are left
    out whole (the first item is kept whenever its head fits). The bytes left are shared among
    the texts, shortest first.
    """
    heads = [memory_head(item) for item in items]
    fixed = [len(h.encode()) + len(MEMORY_TAIL.encode()) for h in heads]
    bodies = [escape_text(item.text) for item in items]
    floors = [min(len(body.encode()), MIN_TEXT_BYTES) for body in bodies]
    keep = len(items)
    while keep > 1 and sum(fixed[:keep]) + sum(floors[:keep]) > budget_bytes:
        keep -= 1
    if keep == 1 and fixed[0] > budget_bytes:
        keep = 0
    bodies = bodies[:keep]
    spare = budget_bytes - sum(fixed[:keep])
    allowance = {}
    # Water-filling: each text gets an equal share of what is left; short texts return the rest.
    order = sorted(range(keep), key=lambda i: len(bodies[i].encode()))
    for position, index in enumerate(order):
        share = spare // (keep - position)
        need = len(bodies[index].encode())
        allowance[index] = min(need, share)
        spare -= allowance[index]
    parts = []
    for index in range(keep):
        body = bodies[index]
        if len(body.encode()) > allowance[index]:
            room = allowance[index] - len(ELLIPSIS.encode())
            body = _utf8_prefix(body, max(room, 0)) + ELLIPSIS if room > 0 else ""
        parts.append(heads[index] + body + MEMORY_TAIL)
    return "".join(parts), [item.id for item in items[:keep]]


def digest_line(memory: Memory, status: DerivedStatus | None = None) -> str:
    """One memory as one markdown list line of the session-context digest, without a newline:
    ``- [<kind> <id> <date>] <annotation> `<title>`: `<text>```, the annotation only when
    ``status`` has one; title, text and the replacements' titles are each a ``markdown_span``."""
    text = markdown_span(memory.text)
    title = markdown_span(memory.title)
    if title:
        text = f"{title}: {text}"
    marker = annotation(status, quote=markdown_span) if status is not None else ""
    line = f"- [{memory.kind} {memory.id} {memory.occurred_at:%Y-%m-%d}]"
    return " ".join(part for part in (line, marker, text) if part)


# The head of a digest line, as ``digest_line`` writes it at the start of a line (memory text is
# escaped into the rest of that line, so it can never start one).
_DIGEST_HEAD = re.compile(r"^- \[\S+ ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) ", re.MULTILINE)


def digest_memory_ids(markdown: str) -> list[str]:
    """The ids of the memories a digest lists, in order, from the heads ``digest_line`` wrote."""
    return _DIGEST_HEAD.findall(markdown)
