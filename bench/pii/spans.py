"""What the name tier masks as people in free text: every ``PERSON`` span the service's masker
finds in the long conversations (``bench/datasets/life_chats/``) and in the bilingual engineering
notes (``bench/datasets/bilingual_notes.json``: texts, titles and questions), counted by span.

Usage (from the repository root)::

    .venv/bin/python bench/pii/spans.py            # counts and the 40 commonest spans of each set
    .venv/bin/python bench/pii/spans.py --all      # every span, with a little of its context

Neither set marks its names, so this reads over-masking rather than scoring it: a span no one is
named ("Mum", "Sorry", the 様 of 仕様) shows at the top of the list. ``names.py`` scores recall
and harmless strings on the marked set.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DATASETS = ROOT / "bench" / "datasets"


def texts_of_sets() -> dict[str, list[str]]:
    """The free text of each set, by name."""
    chats = []
    for path in sorted((DATASETS / "life_chats").glob("c*.json")):
        for session in json.loads(path.read_text(encoding="utf-8"))["sessions"]:
            chats += [turn["text"] for turn in session["turns"]]
    notes = json.loads((DATASETS / "bilingual_notes.json").read_text(encoding="utf-8"))
    bilingual = [m["text"] for m in notes["memories"]] + [m.get("title", "") for m in notes["memories"]]
    return {"life chats": chats, "bilingual notes": bilingual + [q["query"] for q in notes["queries"]]}


def person_spans(masker, texts: list[str]) -> tuple[Counter, dict]:
    """Each ``PERSON`` span's count over ``texts``, and a little of the context of its first."""
    from memory_service.pii import MaskingPolicy

    counts: Counter = Counter()
    context: dict = {}
    for text, found in zip(texts, masker.detect_many(texts, MaskingPolicy(tenant_id="")), strict=True):
        for detection in found:
            if detection.entity == "PERSON":
                span = text[detection.start : detection.end]
                counts[span] += 1
                context.setdefault(span, text[max(0, detection.start - 30) : detection.end + 30].replace("\n", " "))
    return counts, context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every span with its context, not the 40 commonest")
    args = parser.parse_args()
    from memory_service.pii import get_masker  # no Django: the masker reads no settings

    masker = get_masker()
    print(f"masker {masker.version}")
    for name, texts in texts_of_sets().items():
        counts, context = person_spans(masker, texts)
        print(f"\n{name}: {sum(counts.values())} PERSON spans in {len(texts)} texts, {len(counts)} distinct")
        for span, count in counts.most_common(None if args.all else 40):
            print(f"{count:5d}  {span!r}" + (f"  | {context[span]}" if args.all else ""))


if __name__ == "__main__":
    main()
