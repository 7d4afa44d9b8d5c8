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
sys.path.insert(0, str(HERE.parent.parent))  # run as a script: the repository root, for bench.datasets

from bench.datasets.pii_names_rules import (  # noqa: E402
    CJK,
    MarkupError,
    name_problems,
    parse,
    pii_problems,
    unmarked_repeats,
)
from bench.datasets.validate import KANA  # noqa: E402

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


def expected_split(note_id: str) -> str | None:
    m = ID_RE.match(note_id)
    if not m:
        return None
    return "heldout" if int(m.group(2)) % 2 == 0 else "train"


class Tally:
    """The counts of the notes checked so far, keyed by (lang, split) unless said otherwise."""

    def __init__(self) -> None:
        self.n_notes: Counter = Counter()
        self.n_names: Counter = Counter()
        self.n_code: Counter = Counter()
        self.n_no_name: Counter = Counter()
        self.n_many: Counter = Counter()
        self.distinct: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.kinds: dict[str, Counter] = defaultdict(Counter)  # by lang
        self.names_per_note: dict[str, Counter] = defaultdict(Counter)  # by lang
        self.code_per_note: dict[str, Counter] = defaultdict(Counter)  # by lang
        self.longest: dict[str, int] = defaultdict(int)  # by lang
        self.seen_ids: set[str] = set()

    def total(self, counter: Counter, lang: str | None = None, split: str | None = None) -> int:
        return sum(
            v for (lg, sp), v in counter.items() if (lang is None or lg == lang) and (split is None or sp == split)
        )

    def distinct_of(self, lang: str | None = None, split: str | None = None) -> int:
        out: set[tuple[str, str]] = set()
        for (lg, sp), names in self.distinct.items():
            if (lang is None or lg == lang) and (split is None or sp == split):
                out.update((lg, n) for n in names)
        return len(out)


def load(path: Path) -> tuple[list, list[str]]:
    """The notes of the file and the errors of its top level; None for notes when it cannot be read."""
    errors: list[str] = []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        print(f"{path}: cannot load: {exc}")
        return None, errors

    if not isinstance(data, dict):
        print(f"{path}: top level must be an object")
        return None, errors
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
    return notes, errors


def marker_problems(plain: str, spans: list[tuple[str, int, int, str]]) -> list[str]:
    """What is wrong with a note's markers and its unmarked text."""
    problems = []
    for typ, s, e, surface in spans:
        if plain[s:e] != surface:  # defensive: spans must index the plain text
            problems.append(f"span {s}:{e} does not match {surface!r}")
        if typ == "name":
            problems.extend(name_problems(surface))
        elif not surface.strip() or surface != surface.strip():
            problems.append(f"harmless marker {surface!r} is empty or has surrounding whitespace")
    return problems + unmarked_repeats(plain, spans) + pii_problems(plain)


def check_note(i: int, note, tally: Tally, errors: list[str], warnings: list[str]) -> None:
    """Check one note, adding what is wrong to ``errors`` and ``warnings`` and its counts to ``tally``."""
    where = f"notes[{i}]"
    if not isinstance(note, dict):
        errors.append(f"{where}: not an object")
        return
    nid = note.get("id")
    where = f"{nid or where}"
    keys = set(note)
    missing = {"id", "lang", "split", "kind", "text"} - keys
    if missing:
        errors.append(f"{where}: missing fields {sorted(missing)}")
        return
    if keys - {"id", "lang", "split", "kind", "text"}:
        errors.append(f"{where}: unknown fields {sorted(keys - {'id', 'lang', 'split', 'kind', 'text'})}")
    lang, split, kind, text = note["lang"], note["split"], note["kind"], note["text"]
    m = ID_RE.match(nid) if isinstance(nid, str) else None
    if not m:
        errors.append(f"{where}: id must look like en-0001 or ja-0001")
    elif m.group(1) != lang:
        errors.append(f"{where}: id prefix does not match lang {lang!r}")
    if nid in tally.seen_ids:
        errors.append(f"{where}: duplicate id")
    tally.seen_ids.add(nid)
    if lang not in LANGS:
        errors.append(f"{where}: lang must be one of {LANGS}")
        return
    if split not in SPLITS:
        errors.append(f"{where}: split must be one of {SPLITS}")
        return
    if m and expected_split(nid) != split:
        errors.append(f"{where}: split {split!r} breaks the split rule (expected {expected_split(nid)!r})")
    if kind not in KINDS:
        errors.append(f"{where}: kind must be one of {KINDS}")
    if not isinstance(text, str) or not text.strip():
        errors.append(f"{where}: text must be a non-empty string")
        return
    if text != text.strip() or "\n" in text:
        errors.append(f"{where}: text has surrounding whitespace or a line break")

    try:
        plain, spans = parse(text)
    except MarkupError as exc:
        errors.append(f"{where}: malformed markup: {exc}")
        return
    errors.extend(f"{where}: {p}" for p in marker_problems(plain, spans))

    if len(plain) > MAX_CHARS:
        errors.append(f"{where}: {len(plain)} characters after removing markers (max {MAX_CHARS})")
    elif len(plain) > SOFT_MAX_CHARS:
        warnings.append(f"{where}: {len(plain)} characters (aim for under {SOFT_MAX_CHARS})")
    tally.longest[lang] = max(tally.longest[lang], len(plain))
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
    tally.n_notes[key] += 1
    tally.n_names[key] += len(names)
    tally.n_code[key] += len(codes)
    if not names:
        tally.n_no_name[key] += 1
    if len(names) >= 3:
        tally.n_many[key] += 1
    tally.distinct[key].update(sp[3] for sp in names)
    tally.kinds[lang][kind] += 1
    tally.names_per_note[lang][min(len(names), 5)] += 1
    tally.code_per_note[lang][min(len(codes), 5)] += 1


def _count_row(tally: Tally, lang: str | None, split: str | None) -> tuple:
    """One row of the counts table; None for all languages or both splits."""
    return (
        lang or "all",
        split or "all",
        tally.total(tally.n_notes, lang, split),
        tally.total(tally.n_names, lang, split),
        tally.distinct_of(lang, split),
        tally.total(tally.n_code, lang, split),
        tally.total(tally.n_no_name, lang, split),
    )


def print_counts(path: Path, tally: Tally) -> None:
    """The table of counts by language and split, then each language's kinds and markers per note."""
    rows = [_count_row(tally, lang, split) for lang in LANGS for split in (*SPLITS, None)]
    rows += [_count_row(tally, None, split) for split in (*SPLITS, None)]
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
        k = ", ".join(f"{kind}={tally.kinds[lang][kind]}" for kind in KINDS)
        npn = ", ".join(
            f"{n if n < 5 else '5+'}:{tally.names_per_note[lang][n]}" for n in sorted(tally.names_per_note[lang])
        )
        cpn = ", ".join(
            f"{n if n < 5 else '5+'}:{tally.code_per_note[lang][n]}" for n in sorted(tally.code_per_note[lang])
        )
        print(f"  {lang}: kinds {k}")
        print(
            f"      notes by number of names {npn}; by number of harmless strings {cpn}; "
            f"longest note {tally.longest[lang]} characters"
        )


def check_minimums(tally: Tally, errors: list[str]) -> None:
    """The minimum counts per language and split."""
    for lang in LANGS:
        notes_l = tally.total(tally.n_notes, lang)
        checks = [
            (notes_l, MIN_NOTES_PER_LANG, "notes"),
            (tally.total(tally.n_names, lang), MIN_NAMES_PER_LANG, "name occurrences"),
            (tally.distinct_of(lang), MIN_DISTINCT_NAMES_PER_LANG, "distinct names"),
            (tally.total(tally.n_names, lang, "heldout"), MIN_HELDOUT_NAMES_PER_LANG, "held-out name occurrences"),
            (tally.total(tally.n_code, lang), MIN_HARMLESS_PER_LANG, "harmless occurrences"),
            (tally.total(tally.n_many, lang), MIN_NOTES_WITH_3_NAMES, "notes with 3 or more names"),
        ]
        for value, minimum, what in checks:
            if value < minimum:
                errors.append(f"{lang}: {value} {what}, need at least {minimum}")
        if notes_l:
            share = tally.total(tally.n_no_name, lang) / notes_l
            if not NO_NAME_SHARE[0] <= share <= NO_NAME_SHARE[1]:
                errors.append(
                    f"{lang}: {share:.0%} of notes have no name, expected {NO_NAME_SHARE[0]:.0%}-{NO_NAME_SHARE[1]:.0%}"
                )
        missing_kinds = [k for k in KINDS if not tally.kinds[lang][k]]
        if missing_kinds:
            errors.append(f"{lang}: no notes of kind {missing_kinds}")
    if tally.total(tally.n_code) < MIN_HARMLESS_TOTAL:
        errors.append(f"{tally.total(tally.n_code)} harmless occurrences in all, need at least {MIN_HARMLESS_TOTAL}")
    for split in SPLITS:
        harmless = tally.total(tally.n_code, None, split)
        if harmless < MIN_HARMLESS_PER_SPLIT:
            errors.append(f"{split}: {harmless} harmless occurrences, need at least {MIN_HARMLESS_PER_SPLIT}")


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_PATH
    warnings: list[str] = []
    notes, errors = load(path)
    if notes is None:
        return 1
    tally = Tally()
    for i, note in enumerate(notes):
        check_note(i, note, tally, errors, warnings)
    print_counts(path, tally)
    check_minimums(tally, errors)
    for w in warnings:
        print(f"warning: {w}")
    for e in errors:
        print(f"error: {e}")
    print("OK" if not errors else f"FAILED: {len(errors)} error(s)")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
