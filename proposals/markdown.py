"""AGENTS.md as text: its headings, where an approved addition goes, and the diff a reviewer reads.

Only ``##`` and ``###`` headings are sections a proposal may name (AGENTS.md files put ``### Always``,
``### Ask First`` and ``### Never`` under ``## Boundaries``). Headings inside fenced code blocks
are not headings. Nothing here touches the database.
"""

import difflib
import re
import unicodedata
from dataclasses import dataclass
from datetime import date

from memory_service.exceptions import ValidationError

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BULLET_RE = re.compile(r"^\s*[-*+][ \t]+")
SECTION_LEVELS = (2, 3)
MAX_SECTION_CHARS = 200
MAX_ADDITION_CHARS = 2000
MAX_ADDITION_LINES = 20
AGENT_MARK = "🤖"


@dataclass(frozen=True)
class Section:
    """A section a proposal names: its heading level (None = "##" or "###", whichever exists) and title."""

    level: int | None
    title: str

    def heading(self) -> str:
        """The heading line a new section gets (``##`` unless a level was named)."""
        return f"{'#' * (self.level or 2)} {self.title}"

    def __str__(self) -> str:
        """As the proposal names it: with its hashes only if a level was named."""
        return self.heading() if self.level else self.title


@dataclass(frozen=True)
class Heading:
    line: int
    level: int
    title: str


def _normalise(title: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", title).casefold().split())


def parse_section(value: str) -> Section:
    """``"### Always"``, ``"## Boundaries"`` or a bare ``"Always"``; ValidationError naming ``section``."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("'section' is required.", fields={"section": ["Required."]})
    if "\n" in value or "\r" in value or len(value) > MAX_SECTION_CHARS:
        raise ValidationError(
            f"'section' must be one heading line of at most {MAX_SECTION_CHARS} characters.",
            fields={"section": ["One line, at most 200 characters."]},
        )
    match = _HEADING_RE.match(value.strip())
    level, title = (len(match.group(1)), match.group(2)) if match else (None, value.strip().lstrip("#").strip())
    if level is not None and level not in SECTION_LEVELS:
        raise ValidationError(
            "'section' must be a '##' or '###' heading.", fields={"section": ["Use a ## or ### heading."]}
        )
    if not title.strip():
        raise ValidationError("'section' needs a title.", fields={"section": ["Required."]})
    return Section(level=level, title=" ".join(title.split()))


def validate_addition(value: str) -> str:
    """The addition as it will be inserted: a few lines of text that cannot restructure the document."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("'addition' is required.", fields={"addition": ["Required."]})
    lines = value.strip().splitlines()
    if len(value) > MAX_ADDITION_CHARS or len(lines) > MAX_ADDITION_LINES:
        raise ValidationError(
            f"'addition' takes at most {MAX_ADDITION_CHARS} characters on {MAX_ADDITION_LINES} lines.",
            fields={"addition": ["Too long."]},
        )
    if any(_HEADING_RE.match(line) or _FENCE_RE.match(line) for line in lines):
        raise ValidationError(
            "'addition' may not contain headings or code fences; name the heading in 'section'.",
            fields={"addition": ["No headings or code fences."]},
        )
    return value.strip()


def headings(text: str) -> list[Heading]:
    """Every ATX heading of ``text`` outside fenced code blocks, in order."""
    found, fence = [], None
    for number, line in enumerate(text.splitlines()):
        fence_match = _FENCE_RE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None:
            match = _HEADING_RE.match(line)
            if match:
                found.append(Heading(line=number, level=len(match.group(1)), title=match.group(2)))
    return found


def find_section(text: str, section: Section) -> Heading | None:
    """The first heading matching ``section`` (title compared case- and width-insensitively)."""
    levels = (section.level,) if section.level else SECTION_LEVELS
    wanted = _normalise(section.title)
    return next((h for h in headings(text) if h.level in levels and _normalise(h.title) == wanted), None)


def entry_lines(addition: str, on: date) -> list[str]:
    """The addition as a list item marked as an agent's, with the date (the AGENTS.md convention)."""
    lines = addition.strip().splitlines()
    first = _BULLET_RE.sub("", lines[0], count=1)
    return [f"- {AGENT_MARK} Added {on.isoformat()}: {first}", *(f"  {line.strip()}" for line in lines[1:])]


def insert_addition(text: str, *, section: Section, addition: str, on: date) -> str:
    """``text`` with ``addition`` appended to the body of ``section`` (before its first sub-heading),
    or under a new heading at the end of the document when no such section exists."""
    lines = text.splitlines()
    entry = entry_lines(addition, on)
    target = find_section(text, section)
    if target is None:
        while lines and not lines[-1].strip():
            lines.pop()
        block = [section.heading(), "", *entry]
        lines = [*lines, "", *block] if lines else block
    else:
        later = [h.line for h in headings(text) if h.line > target.line]
        end = later[0] if later else len(lines)
        at = end
        while at - 1 > target.line and not lines[at - 1].strip():
            at -= 1
        if at == target.line + 1:
            entry = ["", *entry]
        if at < len(lines) and at == end:
            entry = [*entry, ""]
        lines[at:at] = entry
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "remove", "context", "hunk"
    text: str


def diff_lines(before: str, after: str, *, context: int = 3) -> list[DiffLine]:
    """A unified diff of two versions as typed lines, for a template to render (it escapes them)."""
    kinds = {"+": "add", "-": "remove", " ": "context", "@": "hunk"}
    result = []
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=context)
    for line in diff:
        if line.startswith(("+++", "---")):
            continue
        result.append(DiffLine(kind=kinds.get(line[:1], "context"), text=line))
    return result
