"""REST search and write latency of two (or more) frozen copies of the application, alternated on one database.

    .venv/bin/python -m bench.perf.ab_rest .data/bench/app-<old> .data/bench/app-<new> [--rounds 4] [--writes 200]
    .venv/bin/python -m bench.perf.ab_rest "<app>@UVICORN_LOOP=asyncio,UVICORN_HTTP=h11" <app>

A variant is an app copy, optionally followed by ``@NAME=VALUE,...``: environment variables for
its uvicorn (server settings compared on the same code). Every variant's server runs with the
per-token rate limit and the failed-authentication limit off (``RATE_LIMIT_PER_MINUTE=0``,
``AUTH_FAILURES_PER_MINUTE=0``; code without the limits ignores them), else one round's requests
would meet 429s.

The machine is shared and its speed drifts over minutes, so two versions are only compared by
alternating them: each round starts uvicorn on 127.0.0.1:8030 from each copy in turn (order
reversed every round), sends the same 400 searches (30 more first, not counted), then the same
``--writes`` POST /api/v1/memories (notes with PII in them, masked on write; 10 more first, not
counted; 0 skips writes), and stops it. The memories written are then deleted as the schema owner
and the bench Redis db emptied of their embedding tasks, outside the timings, so every variant
writes the same texts (none is answered as a duplicate) into the same corpus.
Needs the bench database running with a corpus loaded (``bench/perf_search.py --load-only
--keep-db``); make a copy with ``git archive <commit> | tar -x -C .data/bench/app-<commit>``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench._stats import median_of
from bench.perf import corpus, measure, stack

NO_LIMITS = {"RATE_LIMIT_PER_MINUTE": "0", "AUTH_FAILURES_PER_MINUTE": "0"}


def variant(spec: str) -> tuple[Path, dict[str, str]]:
    """``DIR[@NAME=VALUE,...]`` → (app copy, extra environment of its server)."""
    app_dir, _, assignments = spec.partition("@")
    env = dict(pair.split("=", 1) for pair in assignments.split(",") if pair)
    return Path(app_dir).resolve(), env


def owner_url() -> str:
    """The schema owner's URL, from the bench env file (ADMIN_DATABASE_URL)."""
    for line in stack.PROFILE.env_file.read_text().splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "ADMIN_DATABASE_URL":
            return value.strip().strip("'\"")
    raise SystemExit(f"no ADMIN_DATABASE_URL in {stack.PROFILE.env_file}")


def delete_written(memory_ids: list[str]) -> int:
    """Remove the memories a write run created (no vectors yet) and their queued embedding tasks."""
    import psycopg

    with psycopg.connect(owner_url(), autocommit=True) as conn:
        deleted = conn.execute("DELETE FROM memories_memory WHERE id = ANY(%s::uuid[])", [memory_ids]).rowcount
        conn.execute("VACUUM ANALYZE memories_memory")
    stack.flush_redis_db()
    return deleted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+", help="DIR[@NAME=VALUE,...]")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--writes", type=int, default=200, help="POST /api/v1/memories per round (0: none)")
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    parser.add_argument("--json", default="", help="also write every round's figures to this file")
    args = parser.parse_args()
    specs = corpus.tenant_specs()
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(specs, tenants, args.size, args.requests + 30, seed=args.size)
    rounds: dict[str, list[dict]] = {spec: [] for spec in args.variants}
    for round_ in range(args.rounds):
        for spec in args.variants if round_ % 2 == 0 else list(reversed(args.variants)):
            app_dir, env = variant(spec)
            process = stack.start_web(extra_env=NO_LIMITS | env, app_dir=app_dir)
            writes = None
            try:
                search = measure.http_search(items, warmup=30, max_seconds=600)
                if args.writes:
                    writes = measure.http_writes(
                        specs, tenants, args.size, args.writes, seed=args.size + 1, max_seconds=600
                    )
            finally:
                stack.stop_process(process)
            figures = {"search": search["overall"], "search_errors": search["errors"]}
            overall = search["overall"]
            line = f"round {round_} {spec}: search p50 {overall['p50']} p95 {overall['p95']} errors {search['errors']}"
            if writes is not None:
                deleted = delete_written(writes.pop("ids"))
                figures |= {"write": writes["overall"], "write_codes": writes["status_codes"], "deleted": deleted}
                line += (
                    f" | write p50 {writes['overall']['p50']} p95 {writes['overall']['p95']}"
                    f" codes {writes['status_codes']} pii masked {writes['pii_values_masked']} (deleted {deleted})"
                )
            rounds[spec].append(figures)
            print(line, flush=True)
    summary = {}
    for spec, runs in rounds.items():
        summary[spec] = {
            f"{kind}_{q}": median_of([r[kind][q] for r in runs if kind in r])
            for kind in ("search", "write")
            for q in ("p50", "p95")
        }
        print(
            f"{spec}: search p50 per round {[r['search']['p50'] for r in runs]}, median {summary[spec]['search_p50']}"
            f" (p95 median {summary[spec]['search_p95']})"
        )
        if args.writes:
            print(
                f"{spec}: write p50 per round {[r['write']['p50'] for r in runs]}, median {summary[spec]['write_p50']}"
                f" (p95 median {summary[spec]['write_p95']})"
            )
    first, *others = args.variants
    for spec in others:
        for key in ("search_p50", "search_p95", "write_p50", "write_p95"):
            if summary[first][key] and summary[spec][key]:
                print(f"{key} {spec} / {first}: {summary[spec][key] / summary[first][key]:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rounds": rounds, "medians": summary}, indent=1))


if __name__ == "__main__":
    main()
