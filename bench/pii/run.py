"""PII masking benchmark: precision and recall on a labelled corpus, and milliseconds per note.

Usage (from the repository root): ``.venv/bin/python bench/pii/run.py``

``corpus.jsonl`` holds short code notes in English and Japanese, each with the PII values it
contains (``type``, ``value``: an exact substring). A detection counts as a true positive when it
overlaps a labelled value of the same type. Notes without labels are harmless code strings: any
detection there is a false positive. Speed is measured on 300-character windows of the corpus.
"""

import argparse
import json
import resource
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CORPUS = Path(__file__).with_name("corpus.jsonl")
NER_ONLY = {"PERSON", "LOCATION"}


def gold_spans(text: str, pii: list[dict]) -> list[tuple[str, int, int]]:
    """Each labelled value's (type, start, end), taking successive occurrences of repeated values."""
    spans = []
    for item in pii:
        start = text.find(item["value"])
        while any(start == other_start for _, other_start, _ in spans):
            start = text.find(item["value"], start + 1)
        spans.append((item["type"], start, start + len(item["value"])))
    return spans


def score(masker, policy, notes: list[dict]) -> dict:
    found, missed, false_positives = Counter(), Counter(), Counter()
    harmless_changed = 0
    for note in notes:
        gold = gold_spans(note["text"], note["pii"])
        detections = masker.detect(note["text"], policy)
        for entity, start, end in gold:
            hit = any(d.entity == entity and d.start < end and start < d.end for d in detections)
            (found if hit else missed)[entity] += 1
        for d in detections:
            if not any(d.entity == entity and d.start < end and start < d.end for entity, start, end in gold):
                false_positives[d.entity] += 1
        if not gold and detections:
            harmless_changed += 1
    return {"found": found, "missed": missed, "false_positives": false_positives, "harmless_changed": harmless_changed}


def ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 1.0


def ms_per_note(masker, policy, texts: list[str], *, size: int = 300, repeat: int = 20) -> float:
    joined = " ".join(texts)
    windows = [joined[start : start + size] for start in range(0, max(1, len(joined) - size), size // 3)]
    for window in windows:
        masker.mask(window, policy)
    started = time.perf_counter()
    for _ in range(repeat):
        for window in windows:
            masker.mask(window, policy)
    return (time.perf_counter() - started) * 1000 / (repeat * len(windows))


def main() -> None:
    parser = argparse.ArgumentParser(description="PII masking: detection quality and speed on the labelled corpus.")
    parser.add_argument("--out", default="", help="also write the results as a markdown section to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    from memory_service.pii import MaskingPolicy, get_masker

    imported = time.perf_counter()
    masker = get_masker()
    loaded = time.perf_counter()

    notes = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    policy = MaskingPolicy(tenant_id="bench")
    result = score(masker, policy, notes)
    found, missed, false_positives = result["found"], result["missed"], result["false_positives"]

    harmless = sum(1 for note in notes if not note["pii"])
    labelled = sum(found.values()) + sum(missed.values())
    rows = [
        (e, found[e], missed[e], false_positives[e]) for e in sorted(set(found) | set(missed) | set(false_positives))
    ]
    true_positives = sum(found.values())
    regex_found = sum(count for entity, count in found.items() if entity not in NER_ONLY)
    regex_missed = sum(count for entity, count in missed.items() if entity not in NER_ONLY)
    figures = {
        "precision": ratio(true_positives, true_positives + sum(false_positives.values())),
        "recall (all types)": ratio(true_positives, true_positives + sum(missed.values())),
        "recall (regex-tier types)": ratio(regex_found, regex_found + regex_missed),
    }
    speed = {
        lang: ms_per_note(masker, policy, [n["text"] for n in notes if n["lang"] == lang]) for lang in ("en", "ja")
    }
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"masker {masker.version}, tiers {sorted(masker.tiers)}")
    print(f"notes {len(notes)} ({harmless} harmless), labelled values {labelled}")
    print(f"{'type':<16}{'found':>7}{'missed':>8}{'false+':>8}")
    for entity, f, m, fp in rows:
        print(f"{entity:<16}{f:>7}{m:>8}{fp:>8}")
    for name, value in figures.items():
        print(f"{name} {value:.3f}")
    print(f"harmless notes changed {result['harmless_changed']}")
    for language, ms in speed.items():
        print(f"ms per 300-char note ({language}) {ms:.2f}")
    print(f"import {imported - started:.2f} s, load {loaded - imported:.2f} s")
    print(f"max RSS {rss:.0f} MB")
    if args.out:
        section = [
            "## PII masking",
            "",
            f"Command: `.venv/bin/python bench/pii/run.py` — {datetime.now():%Y-%m-%d}, masker {masker.version}, "
            f"tiers {', '.join(sorted(masker.tiers))}. {len(notes)} labelled notes of our own ({harmless} harmless "
            f"code notes with versions, hashes, UUIDs, ports, timestamps), {labelled} labelled values.",
            "",
            "| type | found | missed | false positives |",
            "|---|---|---|---|",
            *(f"| {entity} | {f} | {m} | {fp} |" for entity, f, m, fp in rows),
            "",
            f"Precision {figures['precision']:.3f}; recall {figures['recall (all types)']:.3f} over all types, "
            f"{figures['recall (regex-tier types)']:.3f} over the types the loaded tiers detect; "
            f"{result['harmless_changed']} harmless notes changed; {speed['en']:.2f} ms (English) / "
            f"{speed['ja']:.2f} ms (Japanese) per 300-character note; import {imported - started:.1f} s, "
            f"build {loaded - imported:.1f} s, {rss:.0f} MB.",
            "",
        ]
        headline = [
            (
                f"PII masking ({', '.join(sorted(masker.tiers))} tiers), our {len(notes)} labelled notes",
                f"precision {figures['precision']:.3f}, recall {figures['recall (regex-tier types)']:.3f} on the "
                f"types it detects; {result['harmless_changed']} of {harmless} harmless notes changed; "
                f"{speed['en']:.1f} / {speed['ja']:.1f} ms per note (EN / JA)",
                "",
            )
        ]
        from bench._stack import write_section

        write_section(args.out, section, headline)


if __name__ == "__main__":
    main()
