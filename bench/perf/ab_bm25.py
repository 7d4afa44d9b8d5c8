"""REST search latency of BM25 (migration 0010) against ts_rank (0009), alternated on one database.

    .venv/bin/python -m bench.perf.ab_bm25 prepare   # ts_rank function under another name, stats check, prewarm
    .venv/bin/python -m bench.perf.ab_bm25 check     # memories_ownerlexicalstats against the memories
    .venv/bin/python -m bench.perf.ab_bm25 run .data/bench/app-2b10bd4 .data/bench/app-<new> --size 1000000 \
        --rounds 6 --json .data/bench/ab_bm25_1m.json

The bench database (``bench/perf_search.py --load-only --keep-db``) is migrated by the new code, so
``memory_lexical_matches`` is 0010's BM25 body. ``prepare`` creates, as the schema owner, 0009's
body (``ts_rank``) as ``memory_lexical_matches_ts_rank`` (same signature, SECURITY DEFINER, EXECUTE
granted to the app role), checks the owner statistics the triggers keep, and reads what searches
read into shared buffers (``load.prewarm``). The old app copy must call the renamed function:

    git archive 2b10bd4 | tar -x -C .data/bench/app-2b10bd4
    sed -i 's/FROM memory_lexical_matches(/FROM memory_lexical_matches_ts_rank(/' \
        .data/bench/app-2b10bd4/memory_service/retrieval/candidates.py

``run`` is ``ab_rest`` without writes, keeping per-round figures by tenant class, the start time,
the load average and ``/healthz`` p50 of each round (the machine's speed at that moment).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.perf import corpus, load, measure, stack
from bench.perf.ab_rest import NO_LIMITS, owner_url, variant

OLD_NAME = "memory_lexical_matches_ts_rank"


def ts_rank_function() -> str:
    from importlib import import_module

    stack.setup_django()
    body = import_module("memory_service.memories.migrations.0009_owner_lexeme_keys").LEXICAL_MATCHES
    assert body.count("CREATE FUNCTION memory_lexical_matches(") == 1
    return body.replace("CREATE FUNCTION memory_lexical_matches(", f"CREATE OR REPLACE FUNCTION {OLD_NAME}(")


def create_old_function() -> None:
    from django.conf import settings

    sql = ts_rank_function()
    app_role = settings.DATABASES["default"]["USER"]
    with psycopg.connect(owner_url(), autocommit=True) as conn:
        conn.execute(sql)
        conn.execute(f'GRANT EXECUTE ON FUNCTION {OLD_NAME}(text[], tsquery, integer) TO "{app_role}"')
        owner = conn.execute(
            "SELECT pg_get_userbyid(proowner), prosecdef FROM pg_proc WHERE proname = %s", [OLD_NAME]
        ).fetchone()
    print(f"{OLD_NAME}: owner {owner[0]}, security definer {owner[1]}, EXECUTE granted to {app_role}")


STATS_CHECK = """
WITH actual AS (
    SELECT tenant_id, owner_key, count(*) AS documents, coalesce(sum(lexical_length), 0) AS terms
    FROM memories_memory GROUP BY tenant_id, owner_key)
SELECT count(*) FILTER (WHERE a.documents IS NOT NULL),
       count(*) FILTER (WHERE s.documents IS NOT NULL),
       count(*) FILTER (WHERE a.documents IS DISTINCT FROM s.documents OR a.terms IS DISTINCT FROM s.terms),
       coalesce(sum(a.documents), 0), coalesce(sum(s.documents), 0)
FROM actual a FULL JOIN memories_ownerlexicalstats s USING (tenant_id, owner_key)
"""


def check_stats() -> dict:
    """Per (tenant, owner): count(*) and sum(lexical_length) of the memories against the stats rows."""
    started = time.perf_counter()
    with psycopg.connect(owner_url(), autocommit=True) as conn:
        owners, rows, mismatches, memories, counted = conn.execute(STATS_CHECK).fetchone()
    result = {
        "owners": owners,
        "stats_rows": rows,
        "mismatches": mismatches,
        "memories": memories,
        "documents_in_stats": counted,
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(f"stats check: {result}")
    return result


def rounds_run(args) -> None:
    specs = corpus.tenant_specs()
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(specs, tenants, args.size, args.requests + 30, seed=args.size)
    token = tenants[specs[0].slug]["token"]
    rounds: dict[str, list[dict]] = {spec: [] for spec in args.variants}
    for round_ in range(args.rounds):
        for spec in args.variants if round_ % 2 == 0 else list(reversed(args.variants)):
            app_dir, env = variant(spec)
            started = datetime.now(UTC).isoformat(timespec="seconds")
            loadavg = Path("/proc/loadavg").read_text().split()[:3]
            process = stack.start_web(extra_env=NO_LIMITS | env, app_dir=app_dir)
            try:
                search = measure.http_search(items, warmup=30, max_seconds=600)
                healthz = measure.http_baseline(token, n=100)["GET /healthz"]["p50"]
            finally:
                stack.stop_process(process)
            figures = {
                "started": started,
                "loadavg": loadavg,
                "healthz_p50": healthz,
                "search": search["overall"],
                "by_class": search["by_class"],
                "errors": search["errors"],
                "degraded": search["degraded"],
                "mean_items": search["mean_items"],
            }
            rounds[spec].append(figures)
            o = search["overall"]
            print(
                f"{started} round {round_} {Path(spec).name}: p50 {o['p50']} p95 {o['p95']} mean {o['mean']} "
                f"errors {search['errors']} degraded {search['degraded']} healthz {healthz} load {loadavg[0]}",
                flush=True,
            )
    summary = {}
    for spec, runs in rounds.items():
        med = {q: round(statistics.median(r["search"][q] for r in runs), 2) for q in ("p50", "p95", "mean")}
        classes = sorted({c for r in runs for c in r["by_class"]})
        med["by_class"] = {
            c: {
                q: round(statistics.median(r["by_class"][c][q] for r in runs if c in r["by_class"]), 2)
                for q in ("p50", "p95", "mean")
            }
            for c in classes
        }
        summary[spec] = med
        print(f"{Path(spec).name}: p50 per round {[r['search']['p50'] for r in runs]}; medians {med}")
    old, new = args.variants
    faster = sum(n["search"]["p50"] < o["search"]["p50"] for o, n in zip(rounds[old], rounds[new], strict=True))
    for q in ("p50", "p95", "mean"):
        print(f"{q} new/old: {summary[new][q] / summary[old][q]:.3f}")
    print(f"new faster at p50 in {faster} of {args.rounds} rounds")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rounds": rounds, "medians": summary}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["prepare", "check", "run"])
    parser.add_argument("variants", nargs="*", help="run: old app copy, new app copy (DIR[@NAME=VALUE,...])")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    parser.add_argument("--json", default="")
    parser.add_argument("--no-prewarm", action="store_true")
    args = parser.parse_args()
    if args.command == "check":
        check_stats()
    elif args.command == "prepare":
        env = stack.start_database()  # already running: reused
        create_old_function()
        check_stats()
        if not args.no_prewarm:
            print(f"prewarm: {load.prewarm(superuser_url=env['superuser_url'])}")
    else:
        assert len(args.variants) == 2, "run: old and new app copies"
        rounds_run(args)


if __name__ == "__main__":
    main()
