"""PII masking benchmark: precision and recall on a labelled corpus, and milliseconds per note.

Usage (from the repository root): ``.venv/bin/python bench/pii/run.py``

``corpus.jsonl`` holds short code notes in English and Japanese, each with the PII values it
contains (``type``, ``value``: an exact substring). A detection counts as a true positive when it
overlaps a labelled value of the same type. Notes without labels are harmless code strings: any
detection there is a false positive. Speed is measured on 300-character windows of the corpus.
"""

import json
import resource
import sys
import time
from collections import Counter
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
    started = time.perf_counter()
    from memory_service.pii import MaskingPolicy, get_masker

    imported = time.perf_counter()
    masker = get_masker()
    loaded = time.perf_counter()

    notes = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    policy = MaskingPolicy(tenant_id="bench")
    result = score(masker, policy, notes)
    found, missed, false_positives = result["found"], result["missed"], result["false_positives"]

    print(f"masker {masker.version}, tiers {sorted(masker.tiers)}")
    harmless = sum(1 for note in notes if not note["pii"])
    labelled = sum(found.values()) + sum(missed.values())
    print(f"notes {len(notes)} ({harmless} harmless), labelled values {labelled}")
    print(f"{'type':<16}{'found':>7}{'missed':>8}{'false+':>8}")
    for entity in sorted(set(found) | set(missed) | set(false_positives)):
        print(f"{entity:<16}{found[entity]:>7}{missed[entity]:>8}{false_positives[entity]:>8}")

    true_positives = sum(found.values())
    print(f"precision          {ratio(true_positives, true_positives + sum(false_positives.values())):.3f}")
    print(f"recall (all types) {ratio(true_positives, true_positives + sum(missed.values())):.3f}")
    regex_found = sum(count for entity, count in found.items() if entity not in NER_ONLY)
    regex_missed = sum(count for entity, count in missed.items() if entity not in NER_ONLY)
    print(f"recall (regex-tier types) {ratio(regex_found, regex_found + regex_missed):.3f}")
    print(f"harmless notes changed {result['harmless_changed']}")

    for language in ("en", "ja"):
        texts = [note["text"] for note in notes if note["lang"] == language]
        print(f"ms per 300-char note ({language}) {ms_per_note(masker, policy, texts):.2f}")
    print(f"import {imported - started:.2f} s, load {loaded - imported:.2f} s")
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
