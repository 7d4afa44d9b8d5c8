"""The markup and labelling rules of pii_names.json (standard library only): the inline markers,
what a name marker may hold, unmarked repeats of a marked name, and other kinds of personal data."""

from __future__ import annotations

import re

# The bilingual set's checker: the same rules for e-mail addresses and phone numbers.
from bench.datasets.validate import EMAIL, PHONE

OPEN = {"[[": "name", "{{": "code"}
CLOSE = {"]]": "name", "}}": "code"}

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff66-\uff9f]")
LATIN_WORD = re.compile(r"^[^\u3040-\u30ff\u3400-\u9fff]+$")

TITLE_PREFIX = re.compile(r"^(Dr|Mr|Mrs|Ms|Mx|Prof|Sir|Dame)\.?\s", re.I)
POSSESSIVE_SUFFIX = re.compile(r"['’]s?$")
ROMAJI_HONORIFIC = re.compile(r"-(san|sama|kun|chan|sensei|senpai|dono)$", re.I)
JA_HONORIFICS = (
    "さん", "様", "さま", "氏", "くん", "君", "ちゃん", "先生", "部長", "課長", "社長", "係長", "主任", "室長",
    "殿", "先輩",
)  # fmt: skip
EDGE_PUNCT = set(" \t\n.,;:!?()[]{}\"'“”‘’「」『』（）、。・:：")

CARD = re.compile(r"(?<!\d)(?:\d[ -]?){13,19}(?!\d)")
IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
URL = re.compile(r"[a-z][a-z0-9+.-]*://", re.I)
DOMAIN = re.compile(
    r"(?<![\w.-])((?:[a-z0-9-]+\.)+(?:com|net|org|io|dev|jp|co|ai|app|cloud|info|biz|us|uk|de))(?![\w-])", re.I
)
RESERVED_DOMAIN = re.compile(r"(^|\.)(example\.(com|net|org)|[a-z0-9-]+\.(test|example|invalid|localhost))$", re.I)


class MarkupError(ValueError):
    pass


def parse(marked: str) -> tuple[str, list[tuple[str, int, int, str]]]:
    """Remove the markers; return the plain text and spans (type, start, end, surface)."""
    out: list[str] = []
    spans: list[tuple[str, int, int, str]] = []
    pos = 0
    plain_len = 0
    current: str | None = None
    start = 0
    while pos < len(marked):
        two = marked[pos : pos + 2]
        if two in OPEN:
            if current is not None:
                raise MarkupError(f"nested marker {two!r} at {pos}")
            current, start = OPEN[two], plain_len
            pos += 2
            continue
        if two in CLOSE:
            if current is None:
                raise MarkupError(f"closing marker {two!r} without an opening one at {pos}")
            if CLOSE[two] != current:
                raise MarkupError(f"marker closed with {two!r} at {pos} but opened as {current}")
            surface = "".join(out)[start:]
            spans.append((current, start, plain_len, surface))
            current = None
            pos += 2
            continue
        ch = marked[pos]
        if ch in "[]{}":
            raise MarkupError(f"stray bracket {ch!r} at {pos} (single brackets and braces are not allowed)")
        out.append(ch)
        plain_len += 1
        pos += 1
    if current is not None:
        raise MarkupError("unclosed marker at end of text")
    return "".join(out), spans


def name_problems(surface: str) -> list[str]:
    problems = []
    if not surface.strip():
        return ["empty name marker"]
    if surface[0] in EDGE_PUNCT or surface[-1] in EDGE_PUNCT:
        problems.append(f"name {surface!r} starts or ends with whitespace or punctuation")
    if "\n" in surface:
        problems.append(f"name {surface!r} spans a line break")
    if TITLE_PREFIX.search(surface):
        problems.append(f"name {surface!r} includes a title")
    if POSSESSIVE_SUFFIX.search(surface):
        problems.append(f"name {surface!r} includes a possessive")
    if ROMAJI_HONORIFIC.search(surface):
        problems.append(f"name {surface!r} includes a romaji honorific")
    if any(surface.endswith(h) for h in JA_HONORIFICS):
        problems.append(f"name {surface!r} ends with an honorific or job title")
    if re.search(r"\d", surface):
        problems.append(f"name {surface!r} contains a digit")
    return problems


def unmarked_repeats(plain: str, spans: list[tuple[str, int, int, str]]) -> list[str]:
    """Names marked in a note that also appear in the same note outside every marker."""
    covered = [False] * len(plain)
    for _, s, e, _ in spans:
        for i in range(s, e):
            covered[i] = True
    found = []
    for surface in sorted({sp[3] for sp in spans if sp[0] == "name"}):
        if LATIN_WORD.match(surface):
            pattern = re.compile(r"(?<![\w-])" + re.escape(surface) + r"(?![\w-])")
        elif len(surface) >= 2:
            pattern = re.compile(re.escape(surface))
        else:
            continue  # one-kanji surnames (林, 森, 原...) also occur inside ordinary words
        for m in pattern.finditer(plain):
            if not any(covered[m.start() : m.end()]):
                found.append(f"name {surface!r} also occurs unmarked at {m.start()}")
                break
    return found


def pii_problems(plain: str) -> list[str]:
    problems = []
    if EMAIL.search(plain):
        problems.append("looks like an e-mail address")
    if PHONE.search(plain):
        problems.append(f"looks like a phone number: {PHONE.search(plain).group(0)!r}")
    if CARD.search(plain):
        problems.append(f"long digit run (card-like): {CARD.search(plain).group(0)!r}")
    if IPV4.search(plain):
        problems.append(f"looks like an IP address: {IPV4.search(plain).group(0)!r}")
    if URL.search(plain):
        problems.append("contains a URL scheme")
    for m in DOMAIN.finditer(plain):
        if not RESERVED_DOMAIN.search(m.group(1)):
            problems.append(f"domain {m.group(1)!r} is not a reserved example domain")
    return problems
