"""Would a scope's vectors read as one index range beat the candidate statement? An experiment on
the loaded bench corpus, not a change to the application.

    .venv/bin/python -m bench.perf.locality --size 1000000 [--queries 120]

Builds ``bench_scope_vectors`` beside the real tables: each vector with its memory's scope owner
key (``user:<id>``, ``repository:<id>``, ``session:<id>``) and the vector as ``halfvec``, under a
btree ``(tenant_id, model, owner_key) INCLUDE (memory_id, embedding)``, so that a scope's vectors
are one ordered index range read without the heap. Then, for the same search requests, times the
application's dense stage (``find_candidates`` without lexical and recent, as the app role under
RLS) and the exact top 50 from the new index (as the owner), each warm, alternating which goes
first. Recall@10 of the halfvec index scan against the app's exact scan on scopes up to 10k rows.
The table is dropped at the end.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import time

from bench.perf import corpus, measure, stack

BUILD = [
    "DROP TABLE IF EXISTS bench_scope_vectors",
    """CREATE TABLE bench_scope_vectors AS
       SELECT e.tenant_id, e.model,
              m.scope || ':' || CASE m.scope WHEN 'user' THEN m."user" WHEN 'repository' THEN m.repository
                                ELSE m.session END AS owner_key,
              e.memory_id, e.embedding::halfvec(512) AS embedding
       FROM memories_memoryembedding e JOIN memories_memory m ON m.id = e.memory_id""",
    """CREATE INDEX bench_scope_vectors_owner ON bench_scope_vectors (tenant_id, model, owner_key)
       INCLUDE (memory_id, embedding)""",
    "VACUUM ANALYZE bench_scope_vectors",
]
KNN = """SELECT memory_id, embedding <=> %s::halfvec(512) AS distance FROM bench_scope_vectors
         WHERE tenant_id = %s AND model = %s AND owner_key = ANY(%s) ORDER BY distance LIMIT 50"""


def _app_dense(item: dict, vector, backend) -> tuple[str, list]:
    """The application's dense stage for one request: (path, memory ids nearest first)."""
    from django.db import transaction

    from memory_service.memories.models import Memory
    from memory_service.retrieval import candidates as C
    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_token

    with transaction.atomic():
        token = authenticate_token(item["token"])
        scoped = Memory.objects.for_tenant(token.tenant).filter(
            S.scope_filter(token=token, user=item["user"], repository=item["repository"], session="")
        )
        found = C.find_candidates(
            scoped=scoped, token=token, vector=vector, backend=backend, tsquery="", recent_kinds=()
        )
    return found.path, sorted(found.dense, key=found.dense.get, reverse=True)


def _covering(owner, params: list) -> list:
    """The exact top 50 of the scope from the covering index, nearest first."""
    return [row[0] for row in owner.execute(KNN, params).fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, required=True, help="corpus size loaded")
    parser.add_argument("--queries", type=int, default=120)
    args = parser.parse_args()
    env = stack.start_database()
    stack.setup_django()
    import psycopg
    from django.db import transaction
    from pgvector import HalfVector

    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_token

    owner = psycopg.connect(env["owner_url"].replace("postgres://", "postgresql://"), autocommit=True)
    started = time.monotonic()
    for statement in BUILD:
        owner.execute(statement)
    build_s = time.monotonic() - started
    size = owner.execute("SELECT pg_size_pretty(pg_relation_size('bench_scope_vectors_owner'))").fetchone()[0]
    print(f"built bench_scope_vectors and its index ({size}) in {build_s:.0f} s", flush=True)

    tokens = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(corpus.tenant_specs(), tokens, args.size, args.queries, seed=args.size + 7)
    backend = S.get_backend()
    times: dict[tuple[str, str], list[float]] = {}
    recalls: list[float] = []
    plans: dict[str, int] = {}
    for n, item in enumerate(items):
        with transaction.atomic():
            token = authenticate_token(item["token"])
            vector = backend.embed_query(S.mask_query(tenant=token.tenant, query=item["query"]))
        keys = [f"user:{item['user']}", f"repository:{item['repository']}"]
        knn_params = [HalfVector(vector).to_text(), item["tenant_id"], backend.model_id, keys]

        order = [
            ("app", functools.partial(_app_dense, item, vector, backend)),
            ("covering index", functools.partial(_covering, owner, knn_params)),
        ]
        for name, fn in order if n % 2 else order[::-1]:
            fn()  # warm
            t = time.perf_counter()
            result = fn()
            elapsed = (time.perf_counter() - t) * 1000
            times.setdefault((item["class"], name), []).append(elapsed)
            times.setdefault(("all", name), []).append(elapsed)
            if name == "app":
                path, app_ids = result
            else:
                cov_ids = result
        plans[path] = plans.get(path, 0) + 1
        if path == "exact" and app_ids:
            top = set(app_ids[:10])
            recalls.append(len(top & set(cov_ids[:10])) / len(top))
    plan = owner.execute("EXPLAIN " + KNN, knn_params).fetchall()
    owner.execute("DROP TABLE bench_scope_vectors")
    owner.close()

    nodes = [re.sub(r"'\[[^']*\]'", "'[…]'", r[0].strip()) for r in plan]
    print(f"app paths: {plans}; covering index plan: {' / '.join(nodes)}")
    print("| tenant class | method | n | p50 / p95 ms |")
    print("|---|---|---|---|")
    for (cls, name), values in sorted(times.items()):
        print(f"| {cls} | {name} | {len(values)} | {measure.pct(values, 0.5)} / {measure.pct(values, 0.95)} |")
    if recalls:
        print(
            f"recall@10 of the halfvec index scan against the app's exact scan: mean "
            f"{sum(recalls) / len(recalls):.3f}, min {min(recalls):.2f} ({len(recalls)} queries)"
        )


if __name__ == "__main__":
    main()
