#!/usr/bin/env python3
"""Validate pii_names.json, the person-name masking evaluation set (standard library only).

The set is described in README.md ("pii_names.json"). Each note's text carries two kinds
of inline markers:

    [[...]]  one occurrence of a person's name (the name only: no honorific, title or 's)
    {{...}}  one harmless code string that must survive masking unchanged

This script checks the format (fields, enums, id format and uniqueness, the split rule),
that markers are balanced, not nested and well formed, a few labelling rules (no titles or
honorifics inside a name marker, no unmarked repeat of a marked name in the same note),
a guard against other kinds of personal data (e-mail addresses, phone numbers, card-like
digit runs, IP addresses, non-reserved domains), the note length limit and the minimum
counts per language and split. It prints a table of counts.

Usage (from the repository root):  python3 bench/datasets/pii_names_check.py [path]
Exit status 0 when the file passes, 1 otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PATH = HERE / "pii_names.json"

LANGS = ("en", "ja")
SPLITS = ("train", "heldout")
KINDS = ("lesson", "decision", "preference", "conclusion")
ID_RE = re.compile(r"^(en|ja)-(\d{4})$")

MAX_CHARS = 500  # hard limit on the note text after the markers are removed
SOFT_MAX_CHARS = 400  # notes longer than this are reported, not rejected

# Minimum counts (the dataset brief).
MIN_NOTES_PER_LANG = 150
MIN_NAMES_PER_LANG = 300
MIN_DISTINCT_NAMES_PER_LANG = 200
MIN_HELDOUT_NAMES_PER_LANG = 130
MIN_HARMLESS_TOTAL = 400
MIN_HARMLESS_PER_SPLIT = 160  # both languages together
MIN_HARMLESS_PER_LANG = 150  # "spread over both languages"
NO_NAME_SHARE = (0.10, 0.25)  # share of notes without any name, per language
MIN_NOTES_WITH_3_NAMES = 5  # per language

OPEN = {"[[": "name", "{{": "code"}
CLOSE = {"]]": "name", "}}": "code"}

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff66-\uff9f]")
KANA = re.compile(r"[\u3040-\u30ff]")
LATIN_WORD = re.compile(r"^[^\u3040-\u30ff\u3400-\u9fff]+$")

TITLE_PREFIX = re.compile(r"^(Dr|Mr|Mrs|Ms|Mx|Prof|Sir|Dame)\.?\s", re.I)
POSSESSIVE_SUFFIX = re.compile(r"['’]s?$")
ROMAJI_HONORIFIC = re.compile(r"-(san|sama|kun|chan|sensei|senpai|dono)$", re.I)
JA_HONORIFICS = (
    "さん",
    "様",
    "さま",
    "氏",
    "くん",
    "君",
    "ちゃん",
    "先生",
    "部長",
    "課長",
    "社長",
    "係長",
    "主任",
    "室長",
    "殿",
    "先輩",
)
EDGE_PUNCT = set(" \t\n.,;:!?()[]{}\"'“”‘’「」『』（）、。・:：")

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
PHONE = re.compile(r"(?<![\w.-])(?:\+\d{1,3}[ -]?)?\(?\d{2,4}\)?[ -]\d{3,4}[ -]\d{3,4}(?![\w-])")
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


def expected_split(note_id: str) -> str | None:
    m = ID_RE.match(note_id)
    if not m:
        return None
    return "heldout" if int(m.group(2)) % 2 == 0 else "train"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_PATH
    errors: list[str] = []
    warnings: list[str] = []

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        print(f"{path}: cannot load: {exc}")
        return 1

    if not isinstance(data, dict):
        print(f"{path}: top level must be an object")
        return 1
    if data.get("version") != 1:
        errors.append("version must be 1")
    for key in ("description", "split_rule"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            errors.append(f"{key} must be a non-empty string")
    extra = set(data) - {"version", "description", "split_rule", "notes"}
    if extra:
        errors.append(f"unknown top-level keys: {sorted(extra)}")
    notes = data.get("notes")
    if not isinstance(notes, list) or not notes:
        errors.append("notes must be a non-empty list")
        notes = []

    # counters keyed by (lang, split)
    n_notes: Counter = Counter()
    n_names: Counter = Counter()
    n_code: Counter = Counter()
    n_no_name: Counter = Counter()
    n_many: Counter = Counter()
    distinct: dict[tuple[str, str], set[str]] = defaultdict(set)
    kinds: dict[str, Counter] = defaultdict(Counter)
    names_per_note: dict[str, Counter] = defaultdict(Counter)
    code_per_note: dict[str, Counter] = defaultdict(Counter)
    longest: dict[str, int] = defaultdict(int)
    seen_ids: set[str] = set()

    for i, note in enumerate(notes):
        where = f"notes[{i}]"
        if not isinstance(note, dict):
            errors.append(f"{where}: not an object")
            continue
        nid = note.get("id")
        where = f"{nid or where}"
        keys = set(note)
        missing = {"id", "lang", "split", "kind", "text"} - keys
        if missing:
            errors.append(f"{where}: missing fields {sorted(missing)}")
            continue
        if keys - {"id", "lang", "split", "kind", "text"}:
            errors.append(f"{where}: unknown fields {sorted(keys - {'id', 'lang', 'split', 'kind', 'text'})}")
        lang, split, kind, text = note["lang"], note["split"], note["kind"], note["text"]
        m = ID_RE.match(nid) if isinstance(nid, str) else None
        if not m:
            errors.append(f"{where}: id must look like en-0001 or ja-0001")
        elif m.group(1) != lang:
            errors.append(f"{where}: id prefix does not match lang {lang!r}")
        if nid in seen_ids:
            errors.append(f"{where}: duplicate id")
        seen_ids.add(nid)
        if lang not in LANGS:
            errors.append(f"{where}: lang must be one of {LANGS}")
            continue
        if split not in SPLITS:
            errors.append(f"{where}: split must be one of {SPLITS}")
            continue
        if m and expected_split(nid) != split:
            errors.append(f"{where}: split {split!r} breaks the split rule (expected {expected_split(nid)!r})")
        if kind not in KINDS:
            errors.append(f"{where}: kind must be one of {KINDS}")
        if not isinstance(text, str) or not text.strip():
            errors.append(f"{where}: text must be a non-empty string")
            continue
        if text != text.strip() or "\n" in text:
            errors.append(f"{where}: text has surrounding whitespace or a line break")

        try:
            plain, spans = parse(text)
        except MarkupError as exc:
            errors.append(f"{where}: malformed markup: {exc}")
            continue
        for typ, s, e, surface in spans:
            if plain[s:e] != surface:  # defensive: spans must index the plain text
                errors.append(f"{where}: span {s}:{e} does not match {surface!r}")
            if typ == "name":
                errors.extend(f"{where}: {p}" for p in name_problems(surface))
            elif not surface.strip() or surface != surface.strip():
                errors.append(f"{where}: harmless marker {surface!r} is empty or has surrounding whitespace")
        errors.extend(f"{where}: {p}" for p in unmarked_repeats(plain, spans))
        errors.extend(f"{where}: {p}" for p in pii_problems(plain))

        if len(plain) > MAX_CHARS:
            errors.append(f"{where}: {len(plain)} characters after removing markers (max {MAX_CHARS})")
        elif len(plain) > SOFT_MAX_CHARS:
            warnings.append(f"{where}: {len(plain)} characters (aim for under {SOFT_MAX_CHARS})")
        longest[lang] = max(longest[lang], len(plain))
        if lang == "ja" and not KANA.search(plain):
            errors.append(f"{where}: lang is ja but the text has no kana")
        if lang == "en" and CJK.search(plain):
            errors.append(f"{where}: lang is en but the text has CJK characters")

        names = [sp for sp in spans if sp[0] == "name"]
        codes = [sp for sp in spans if sp[0] == "code"]
        if not spans:
            errors.append(f"{where}: no marker at all")
        elif not names and not codes:
            errors.append(f"{where}: a note without names needs at least one harmless string")
        key = (lang, split)
        n_notes[key] += 1
        n_names[key] += len(names)
        n_code[key] += len(codes)
        if not names:
            n_no_name[key] += 1
        if len(names) >= 3:
            n_many[key] += 1
        distinct[key].update(sp[3] for sp in names)
        kinds[lang][kind] += 1
        names_per_note[lang][min(len(names), 5)] += 1
        code_per_note[lang][min(len(codes), 5)] += 1

    # ---- counts table -------------------------------------------------------------------
    def total(counter: Counter, lang: str | None = None, split: str | None = None) -> int:
        return sum(
            v for (lg, sp), v in counter.items() if (lang is None or lg == lang) and (split is None or sp == split)
        )

    def distinct_of(lang: str | None = None, split: str | None = None) -> int:
        out: set[tuple[str, str]] = set()
        for (lg, sp), names in distinct.items():
            if (lang is None or lg == lang) and (split is None or sp == split):
                out.update((lg, n) for n in names)
        return len(out)

    rows = []
    for lang in LANGS:
        for split in SPLITS:
            rows.append(
                (
                    lang,
                    split,
                    total(n_notes, lang, split),
                    total(n_names, lang, split),
                    distinct_of(lang, split),
                    total(n_code, lang, split),
                    total(n_no_name, lang, split),
                )
            )
        rows.append(
            (
                lang,
                "all",
                total(n_notes, lang),
                total(n_names, lang),
                distinct_of(lang),
                total(n_code, lang),
                total(n_no_name, lang),
            )
        )
    for split in SPLITS:
        rows.append(
            (
                "all",
                split,
                total(n_notes, None, split),
                total(n_names, None, split),
                distinct_of(None, split),
                total(n_code, None, split),
                total(n_no_name, None, split),
            )
        )
    rows.append(("all", "all", total(n_notes), total(n_names), distinct_of(), total(n_code), total(n_no_name)))

    header = (
        "lang",
        "split",
        "notes",
        "name occurrences",
        "distinct names",
        "harmless occurrences",
        "notes without names",
    )
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print(f"{path.name}")
    print(
        "  "
        + "  ".join(h.rjust(w) if i > 1 else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=False)))
    )
    for r in rows:
        print(
            "  "
            + "  ".join(
                str(c).rjust(w) if i > 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))
            )
        )
    for lang in LANGS:
        k = ", ".join(f"{kind}={kinds[lang][kind]}" for kind in KINDS)
        npn = ", ".join(f"{n if n < 5 else '5+'}:{names_per_note[lang][n]}" for n in sorted(names_per_note[lang]))
        cpn = ", ".join(f"{n if n < 5 else '5+'}:{code_per_note[lang][n]}" for n in sorted(code_per_note[lang]))
        print(f"  {lang}: kinds {k}")
        print(
            f"      notes by number of names {npn}; by number of harmless strings {cpn}; "
            f"longest note {longest[lang]} characters"
        )

    # ---- minimums -----------------------------------------------------------------------
    for lang in LANGS:
        notes_l = total(n_notes, lang)
        checks = [
            (notes_l, MIN_NOTES_PER_LANG, "notes"),
            (total(n_names, lang), MIN_NAMES_PER_LANG, "name occurrences"),
            (distinct_of(lang), MIN_DISTINCT_NAMES_PER_LANG, "distinct names"),
            (total(n_names, lang, "heldout"), MIN_HELDOUT_NAMES_PER_LANG, "held-out name occurrences"),
            (total(n_code, lang), MIN_HARMLESS_PER_LANG, "harmless occurrences"),
            (total(n_many, lang), MIN_NOTES_WITH_3_NAMES, "notes with 3 or more names"),
        ]
        for value, minimum, what in checks:
            if value < minimum:
                errors.append(f"{lang}: {value} {what}, need at least {minimum}")
        if notes_l:
            share = total(n_no_name, lang) / notes_l
            if not NO_NAME_SHARE[0] <= share <= NO_NAME_SHARE[1]:
                errors.append(
                    f"{lang}: {share:.0%} of notes have no name, expected {NO_NAME_SHARE[0]:.0%}-{NO_NAME_SHARE[1]:.0%}"
                )
        missing_kinds = [k for k in KINDS if not kinds[lang][k]]
        if missing_kinds:
            errors.append(f"{lang}: no notes of kind {missing_kinds}")
    if total(n_code) < MIN_HARMLESS_TOTAL:
        errors.append(f"{total(n_code)} harmless occurrences in all, need at least {MIN_HARMLESS_TOTAL}")
    for split in SPLITS:
        if total(n_code, None, split) < MIN_HARMLESS_PER_SPLIT:
            errors.append(
                f"{split}: {total(n_code, None, split)} harmless occurrences, need at least {MIN_HARMLESS_PER_SPLIT}"
            )

    for w in warnings:
        print(f"warning: {w}")
    for e in errors:
        print(f"error: {e}")
    print("OK" if not errors else f"FAILED: {len(errors)} error(s)")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
