"""Person-name masking benchmark: recall of names and harmless code strings kept, per language and
split, on ``bench/datasets/pii_names.json``, through the service's own masker.

Usage (from the repository root)::

    .venv/bin/python bench/pii/names.py                 # held-out half, then train, the default tier
    .venv/bin/python bench/pii/names.py --variants      # also the alternatives compared

A name occurrence counts as masked when detections of the masker cover every one of its
characters (a partly masked name still leaks). A harmless string counts as kept when no
detection touches it. The policy is a tenant's default (label mode, every type the loaded tiers
detect); the masker is built exactly as ``get_masker`` builds it, or with another name finder for
the variants. Held-out figures come first: the detectors were tuned on the train half only.
"""

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import regex

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DATASET = ROOT / "bench" / "datasets" / "pii_names.json"
_MARK = regex.compile(r"\[\[(.+?)\]\]|\{\{(.+?)\}\}")


def parse(marked: str) -> tuple[str, list[tuple[int, int]], list[tuple[int, int]]]:
    """The note text without markers, its name spans and its harmless spans."""
    parts, names, harmless = [], [], []
    position = length = 0
    for match in _MARK.finditer(marked):
        parts.append(marked[position : match.start()])
        length += match.start() - position
        value = match.group(1) if match.group(1) is not None else match.group(2)
        (names if match.group(1) is not None else harmless).append((length, length + len(value)))
        parts.append(value)
        length += len(value)
        position = match.end()
    parts.append(marked[position:])
    return "".join(parts), names, harmless


def load(split: str | None = None) -> list[dict]:
    notes = json.loads(DATASET.read_text(encoding="utf-8"))["notes"]
    loaded = []
    for note in notes:
        if split is not None and note["split"] != split:
            continue
        text, names, harmless = parse(note["text"])
        loaded.append({"id": note["id"], "lang": note["lang"], "text": text, "names": names, "harmless": harmless})
    return loaded


def covered(start: int, end: int, detections) -> bool:
    characters = set(range(start, end))
    for detection in detections:
        characters -= set(range(detection.start, detection.end))
    return not characters


def score(masker, policy, notes: list[dict]) -> dict:
    """Recall of names and share of harmless strings kept, per language; misses for inspection."""
    detections = masker.detect_many([note["text"] for note in notes], policy)
    tally = defaultdict(lambda: {"names": 0, "masked": 0, "harmless": 0, "kept": 0})
    missed, broken = [], []
    for note, found in zip(notes, detections, strict=True):
        counts = tally[note["lang"]]
        for start, end in note["names"]:
            counts["names"] += 1
            if covered(start, end, found):
                counts["masked"] += 1
            else:
                missed.append((note["id"], note["text"][start:end]))
        for start, end in note["harmless"]:
            counts["harmless"] += 1
            if not any(d.start < end and start < d.end for d in found):
                counts["kept"] += 1
            else:
                broken.append((note["id"], note["text"][start:end]))
    return {"tally": dict(tally), "missed": missed, "broken": broken}


def timing(masker, policy, notes: list[dict], language: str) -> dict:
    texts = [note["text"] for note in notes if note["lang"] == language]
    started = time.perf_counter()
    for text in texts:
        masker.mask(text, policy)
    one = (time.perf_counter() - started) / len(texts) * 1000
    started = time.perf_counter()
    masker.mask_each(texts, policy)
    batched = (time.perf_counter() - started) / len(texts) * 1000
    return {"ms_per_note": round(one, 2), "ms_per_note_batched": round(batched, 2)}


def report(label: str, result: dict) -> None:
    for language, counts in sorted(result["tally"].items()):
        recall = counts["masked"] / counts["names"] if counts["names"] else 1.0
        kept = counts["kept"] / counts["harmless"] if counts["harmless"] else 1.0
        print(
            f"| {label} | {language} | {counts['masked']}/{counts['names']} = {recall:.3f} "
            f"| {counts['kept']}/{counts['harmless']} = {kept:.3f} |"
        )


def variants():
    """Alternatives to the default name tier, built from the same parts."""
    import spacy

    from memory_service.pii.names import ENGLISH_EXCLUDED, ENGLISH_MODEL, EnglishNames, JapaneseNames

    english = EnglishNames(spacy.load(ENGLISH_MODEL, exclude=list(ENGLISH_EXCLUDED)))
    found = {
        "en model, no name filter": {"en": _Unfiltered(english.nlp)},
        "en model + name filter, no lexicon": {"en": EnglishNames(english.nlp, lexicon=False)},
        "ja: Sudachi + honorifics, no English finder on Japanese notes": {
            "en": _NotOnJapanese(english),
            "ja": JapaneseNames(),
        },
        "ja: + the English finder on Latin runs cut out of the note": {"en": english, "ja": _WithLatin(english)},
    }
    if spacy.util.is_package("ja_ginza"):
        ginza = spacy.load("ja_ginza", exclude=["parser", "bunsetu_recognizer", "compound_splitter"])
        found["ja: GiNZA NER"] = {"en": english, "ja": _Unfiltered(ginza)}
    return found


class _NotOnJapanese:
    """The English finder, given nothing of a Japanese note."""

    def __init__(self, english) -> None:
        self.english = english

    def find(self, texts):
        from memory_service.pii.normalize import detect_language

        found = self.english.find([text if detect_language(text) == "en" else "" for text in texts])
        return found


class _WithLatin:
    """The Japanese finder plus the English one on each run of Latin letters (measured, not kept)."""

    _LATIN_RUN = regex.compile(r"[A-Za-z][A-Za-z'’\-. ]*[A-Za-z]")

    def __init__(self, english) -> None:
        from memory_service.pii.names import JapaneseNames

        self.japanese = JapaneseNames()
        self.english = english

    def find(self, texts):
        found = self.japanese.find(texts)
        runs = [[match.span() for match in self._LATIN_RUN.finditer(text)] for text in texts]
        pieces = [text[start:end] for text, spans in zip(texts, runs, strict=True) for start, end in spans]
        results = iter(self.english.find(pieces))
        for spans, text_runs in zip(found, runs, strict=True):
            for start, _ in text_runs:
                spans.extend((start + a, start + b, kind) for a, b, kind in next(results) if kind == "PERSON")
        return found


class _Unfiltered:
    """A spaCy pipeline's PERSON spans, as the model gives them."""

    def __init__(self, nlp) -> None:
        self.nlp = nlp

    def find(self, texts):
        from memory_service.pii.names import NER_LABELS

        return [
            [(e.start_char, e.end_char, NER_LABELS[e.label_]) for e in doc.ents if NER_LABELS.get(e.label_) == "PERSON"]
            for doc in self.nlp.pipe(texts)
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", action="store_true", help="also score the alternatives")
    parser.add_argument("--show", type=int, default=0, help="print this many misses per split")
    args = parser.parse_args()

    from memory_service.pii import Masker, MaskingPolicy, get_masker

    policy = MaskingPolicy(tenant_id="bench")
    masker = get_masker()
    print(f"masker {masker.version}, tiers {sorted(masker.tiers)}, name languages {sorted(masker.ner_languages)}")
    print("| masker | language | names masked (recall) | harmless kept |")
    print("|---|---|---|---|")
    for split in ("heldout", "train"):
        result = score(masker, policy, load(split))
        report(f"default, {split}", result)
        if args.show:
            print("missed:", result["missed"][: args.show])
            print("broken:", result["broken"][: args.show])
    if args.variants:
        for label, finders in variants().items():
            for split in ("heldout", "train"):
                report(f"{label}, {split}", score(Masker(name_finders=finders), policy, load(split)))
    notes = load()
    for language in ("en", "ja"):
        print(f"timing {language}: {timing(masker, policy, notes, language)}")


if __name__ == "__main__":
    main()
