"""The ``context`` block handed to an agent: fenced items within a byte budget.

Every item is fenced as ``<memory …>…</memory>``. Its attributes and the annotation line are the
only places markers appear, and only the server writes them; the memory's own text is escaped, so
text such as ``</memory>``, ``⚠️ superseded`` or ``RECENT`` inside a memory cannot forge a fence
or a marker. Texts are shortened before any item is dropped; an annotation is never cut — an item
whose fence and annotation cannot fit is left out whole.
"""

from dataclasses import dataclass
from html import escape

_MARKER_GLYPHS = {"⚠": "&#x26a0;", "△": "&#x25b3;"}
ELLIPSIS = "…"


def escape_text(text: str) -> str:
    """Memory text made inert: markup and marker glyphs become entities."""
    text = escape(text, quote=True)
    for glyph, entity in _MARKER_GLYPHS.items():
        text = text.replace(glyph, entity)
    return text


@dataclass(frozen=True)
class ContextItem:
    id: str
    kind: str
    scope: str
    date: str
    markers: tuple[str, ...]  # RECENT, HIGH, unreviewed — server-made
    status: str
    annotation: str  # server-made; never cut
    title: str
    text: str


def _head(item: ContextItem) -> str:
    attributes = f'id="{item.id}" kind="{item.kind}" scope="{item.scope}" date="{item.date}" status="{item.status}"'
    if item.markers:
        attributes += f' markers="{" ".join(item.markers)}"'
    head = f"<memory {attributes}>\n"
    if item.annotation:
        head += f"{item.annotation}\n"
    if item.title:
        head += f"# {escape_text(item.title)}\n"
    return head


_TAIL = "\n</memory>\n"


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

    Items keep their order. The fixed part of each item (fence, markers, annotation, title) is
    never cut; when all fixed parts cannot fit, the last items are left out whole. The bytes left
    are shared among the texts, shortest first, so that texts are shortened before anything is
    dropped.
    """
    heads = [_head(item) for item in items]
    fixed = [len(h.encode()) + len(_TAIL.encode()) for h in heads]
    keep = len(items)
    while keep and sum(fixed[:keep]) > budget_bytes:
        keep -= 1
    bodies = [escape_text(item.text) for item in items[:keep]]
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
        parts.append(heads[index] + body + _TAIL)
    return "".join(parts), [item.id for item in items[:keep]]
