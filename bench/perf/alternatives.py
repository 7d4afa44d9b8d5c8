"""Alternatives to the app's query strategy, measured in SQL on the loaded bench database.

    .venv/bin/python -m bench.perf.alternatives [--queries 40]

1. Which plan the k-NN variants really get (EXPLAIN) for small, medium and large scopes.
2. Lexical stage: the app's query (every query term OR-ed, ts_rank_cd over every match) against
   the same without stop words and/or with ts_rank, on the largest scopes.
Runs as the app role with the tenant set (RLS on), like a request. Results go to
bench/perf/results.json under "alternatives" (one entry per corpus size).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

from bench._stats import summary
from bench.perf import corpus, measure, plans, recall, stack
from bench.perf.results import load_results, save_results

STOP = {
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "how", "i", "in", "into", "is", "it", "of", "on", "or", "our", "than", "that", "the",
    "then", "there", "these", "this", "those", "to", "was", "we", "were", "what", "when", "where", "which",
    "who", "why", "will", "with", "you", "your"
}  # fmt: skip


def stripped_query(raw: str) -> str:
    terms = [t for t in raw.split(" | ") if t.strip("'") not in STOP]
    return " | ".join(terms)


# The k-NN variants compared: (name, order, ef_search, HNSW forced).
KNN_VARIANTS = [("exact (+0)", "exact", None, False), ("planner choice, ef=100 relaxed", "hnsw", 100, False)]
KNN_VARIANTS += [(f"HNSW forced, ef={ef} relaxed", "hnsw", ef, True) for ef in (40, 100, 200, 400)]
# The variants whose plan the report shows, per scope size bucket.
SHOWN_PLANS = ("exact (+0)", "planner choice, ef=100 relaxed", "HNSW forced, ef=100 relaxed")
LEXICAL_VARIANTS = (
    "app: all terms, ts_rank_cd",
    "no stop words, ts_rank_cd",
    "all terms, ts_rank",
    "no stop words, ts_rank",
)


def measure_alternatives(
    *, size: int, queries: int = 30, per_bucket: int = 6, log=print, plain_owner_url: str = ""
) -> dict:
    """The k-NN variants by scope size bucket (``per_bucket`` searches each) and the lexical variants
    on the hottest scopes (``queries`` searches), with the STORAGE PLAIN copy of the vectors when
    ``plain_owner_url`` is given. Needs Django set up and the bench database running."""
    from memory_service.retrieval import search as S

    tenants = json.loads(stack.TOKENS_FILE.read_text())
    specs = corpus.tenant_specs()
    backend = S.get_backend()
    items = measure.workload(specs, tenants, size, queries * 6, seed=778)
    # the largest scopes: the hot user + hot repository of the biggest tenants
    big = [i for i in items if i["class"] in ("big (10%)", "large (2-9%)")][:queries]
    out: dict = {"corpus": size, "plans": {}, "lexical": {}}
    exact_sqls: list[dict] = []

    # 1. k-NN variants per scope size: recall vs exact, warm timing (median of 3, round-robin), index used
    pool = measure.workload(specs, tenants, size, queries * 12, seed=777)
    by_bucket = _by_bucket(pool, per_bucket)
    out["knn"] = {}
    for bucket, members in sorted(by_bucket.items()):
        out["knn"][bucket] = _knn_bucket(bucket, members, backend, plans_out=out["plans"], exact_sqls=exact_sqls)
        log(f"{bucket} {json.dumps(out['knn'][bucket])}")
    if plain_owner_url:
        log("STORAGE PLAIN copy vs the real table, exact (+0) k-NN of the same queries")
        for cap in exact_sqls:  # biggest scopes first
            cap["ms"] = cap["scope_rows"]
        out["storage_plain"] = plans.plain_storage_comparison(
            plain_owner_url, exact_sqls, limit=len(exact_sqls), max_seconds=300
        )
        log(str(out["storage_plain"]))

    # 2. lexical variants on the largest scopes
    series, matches = _lexical(big)
    out["lexical"] = {name: summary(v) for name, v in series.items()}
    out["lexical_matches"] = {name: summary([float(x) for x in v]) for name, v in matches.items()}
    out["lexical_scope_rows"] = "hot scopes of the big and large tenants"
    log(json.dumps(out["lexical"], indent=1) + " " + json.dumps(out["lexical_matches"], indent=1))
    return out


def _scoped(token, item: dict):
    """The memories of the item's scope (user + repository), as the app's search reads them."""
    from memory_service.memories.models import Memory
    from memory_service.retrieval import search as S

    return Memory.objects.for_tenant(token.tenant).filter(
        S.scope_filter(principal=token, user=item["user"], repository=item["repository"], session="")
    )


def _bucket(rows: int) -> str:
    if rows <= 200:
        return "a ≤200"
    if rows <= 2000:
        return "b 201-2k"
    if rows <= 10_000:
        return "c 2k-10k"
    if rows <= 20_000:
        return "d 10k-20k"
    return "e >20k"


def _by_bucket(pool: list[dict], per_bucket: int) -> dict[str, list[tuple[dict, int]]]:
    """The first ``per_bucket`` searches of ``pool`` in each scope size bucket, with their scope's rows."""
    from django.db import transaction

    from tenants.authentication import authenticate_principal

    by_bucket: dict = {}
    for item in pool:
        with transaction.atomic():
            token = authenticate_principal(item["token"])
            n = _scoped(token, item).count()
        bucket = _bucket(n)
        if len(by_bucket.setdefault(bucket, [])) < per_bucket:
            by_bucket[bucket].append((item, n))
    return by_bucket


def _run_variant(item, vector, backend, order, ef, force, *, explain=False, capture: list | None = None, rows=0):
    """One k-NN variant of the item's search: (ms, rows nearest first), or its plan with ``explain``.
    With ``capture``, the exact variant's SQL is appended to it (with ``rows``, its scope's rows)."""
    from django.db import connection, transaction
    from django.db.models import F

    from memory_service.retrieval.candidates import CANDIDATES
    from tenants.authentication import authenticate_principal

    with transaction.atomic():
        token = authenticate_principal(item["token"])
        with connection.cursor() as cur:
            if ef:
                cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                cur.execute(f"SET LOCAL hnsw.ef_search = {ef}")
            if force:
                cur.execute("SET LOCAL enable_sort = off")  # only the HNSW index gives the order
        qs = recall.dense_qs(_scoped(token, item), token, vector, backend)
        qs = qs.order_by(F("distance") + 0) if order == "exact" else qs.order_by("distance")
        qs = qs.values_list("memory_id", "distance")[:CANDIDATES]
        if order == "exact" and not explain and capture is not None:
            sql0, params0 = qs.query.sql_with_params()
            capture.append(
                {"class": "vector k-NN", "hnsw": False, "sql": sql0, "params": params0, "ms": 0.0, "scope_rows": rows}
            )
        if explain:
            sql, params = qs.query.sql_with_params()
            with connection.cursor() as cur:
                cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params)
                return "\n".join(r[0] for r in cur.fetchall())
        t = time.perf_counter()
        found = list(qs)
        return (time.perf_counter() - t) * 1000, sorted(found, key=lambda r: r[1])


def _knn_bucket(bucket: str, members: list, backend, *, plans_out: dict, exact_sqls: list) -> dict:
    """Every k-NN variant on the searches of one bucket: three round-robin rounds (the exact SQL kept
    from the first), recall against the exact variant, and whether each plan read the HNSW index."""
    stats = {name: {"ms": [], "recall": [], "hnsw_used": 0} for name, *_ in KNN_VARIANTS}
    for item, n in members:
        vector = backend.embed_query(item["query"])
        timings = {name: [] for name, *_ in KNN_VARIANTS}
        found = {}
        for round_ in range(3):
            capture = exact_sqls if round_ == 0 else None
            for name, order, ef, force in KNN_VARIANTS:
                ms, rows = _run_variant(item, vector, backend, order, ef, force, capture=capture, rows=n)
                timings[name].append(ms)
                found[name] = rows
        exact = found["exact (+0)"]
        for name, order, ef, force in KNN_VARIANTS:
            stats[name]["ms"].append(statistics.median(timings[name]))
            rec = recall.recall_at_k(found[name], exact)
            if rec is not None:
                stats[name]["recall"].append(rec)
            plan = _run_variant(item, vector, backend, order, ef, force, explain=True)
            stats[name]["hnsw_used"] += "memory_embedding_usem3_hnsw" in plan
            key = f"{bucket} | {name}"
            if key not in plans_out and name in SHOWN_PLANS:
                plans_out[key] = re.sub(r"'\[[^\]]{200,}\]'", "'[…512 floats…]'", plan)
    out = {"queries": len(members), "scope_rows": [n for _, n in members]}
    for name, st in stats.items():
        out[name] = {
            "ms": summary(st["ms"]),
            "recall": round(statistics.fmean(st["recall"]), 4) if st["recall"] else None,
            "recall_min": round(min(st["recall"]), 2) if st["recall"] else None,
            "hnsw_index_used": f"{st['hnsw_used']}/{len(members)}",
        }
    return out


def _lexical(big: list[dict]) -> tuple[dict, dict]:
    """Client-timed ms of each lexical variant on the hottest scopes, and the rows each tsquery matches."""
    from django.contrib.postgres.search import SearchQuery, SearchRank
    from django.db import transaction
    from django.db.models import F

    from memory_service.retrieval.candidates import CANDIDATES
    from memory_service.retrieval.lexical import lexical_query
    from tenants.authentication import authenticate_principal

    series = {k: [] for k in LEXICAL_VARIANTS}
    matches = {"all terms": [], "no stop words": []}
    for item in big:
        raw = lexical_query(item["query"])
        for name in series:
            query_text = stripped_query(raw) if name.startswith("no stop") else raw
            if not query_text:
                continue
            with transaction.atomic():
                token = authenticate_principal(item["token"])
                scoped = _scoped(token, item)
                query = SearchQuery(query_text, search_type="raw", config="simple")
                rows = (
                    scoped.filter(search_vector=query)
                    .annotate(
                        rank=SearchRank(F("search_vector"), query, cover_density="ts_rank_cd" in name, normalization=1)
                    )
                    .order_by("-rank")
                    .values_list("id", "rank")[:CANDIDATES]
                )
                t = time.perf_counter()
                list(rows)
                series[name].append((time.perf_counter() - t) * 1000)
                if name.endswith("ts_rank_cd"):
                    key = "no stop words" if name.startswith("no stop") else "all terms"
                    matches[key].append(scoped.filter(search_vector=query).count())
    return series, matches


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, required=True, help="corpus size loaded (10000, 100000, 1000000)")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--per-bucket", type=int, default=6)
    parser.add_argument("--plain", action="store_true", help="also compare a STORAGE PLAIN copy of the vectors")
    parser.add_argument("--profile", type=int, default=0, help="also profile N REST searches through the ASGI app")
    args = parser.parse_args()
    with stack.database() as env:
        out = measure_alternatives(
            size=args.size,
            queries=args.queries,
            per_bucket=args.per_bucket,
            log=lambda m: print(m, flush=True),
            plain_owner_url=env["owner_url"] if args.plain else "",
        )
        if args.profile:
            from bench.perf import profile_request

            out["asgi_profile"] = profile_request.measure(size=args.size, requests=args.profile)
            print({k: v for k, v in out["asgi_profile"].items() if k != "profile_top_cumulative"}, flush=True)
        out["command"] = (
            "cd /work/main && BENCH_APP_DIR="
            + os.environ.get("BENCH_APP_DIR", "")
            + " .venv/bin/python -m bench.perf.alternatives "
            + " ".join(sys.argv[1:])
        )
        results = load_results()
        results.setdefault("alternatives", {})[str(args.size)] = out
        save_results(results)


if __name__ == "__main__":
    main()
