"""REST search latency of two (or more) frozen copies of the application, alternated on one database.

    .venv/bin/python -m bench.perf.ab_rest .data/bench/app-<old> .data/bench/app-<new> [--rounds 4]
    .venv/bin/python -m bench.perf.ab_rest "<app>@UVICORN_LOOP=asyncio,UVICORN_HTTP=h11" <app>

A variant is an app copy, optionally followed by ``@NAME=VALUE,...``: environment variables for
its uvicorn (server settings compared on the same code).

The machine is shared and its speed drifts over minutes, so two versions are only compared by
alternating them: each round starts uvicorn on 127.0.0.1:8030 from each copy in turn (order
reversed every round), sends the same 400 searches (30 more first, not counted) and stops it.
Needs the bench database running with a corpus loaded (``bench/perf_search.py --load-only
--keep-db``); make a copy with ``git archive <commit> | tar -x -C .data/bench/app-<commit>``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.perf import corpus, measure, stack


def variant(spec: str) -> tuple[Path, dict[str, str]]:
    """``DIR[@NAME=VALUE,...]`` → (app copy, extra environment of its server)."""
    app_dir, _, assignments = spec.partition("@")
    env = dict(pair.split("=", 1) for pair in assignments.split(",") if pair)
    return Path(app_dir).resolve(), env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+", help="DIR[@NAME=VALUE,...]")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    args = parser.parse_args()
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(corpus.tenant_specs(), tenants, args.size, args.requests + 30, seed=args.size)
    p50s: dict[str, list[float]] = {spec: [] for spec in args.variants}
    for round_ in range(args.rounds):
        for spec in args.variants if round_ % 2 == 0 else list(reversed(args.variants)):
            app_dir, env = variant(spec)
            process = stack.start_web(extra_env=env, app_dir=app_dir)
            try:
                result = measure.http_search(items, warmup=30, max_seconds=600)
            finally:
                stack.stop_process(process)
            overall = result["overall"]
            p50s[spec].append(overall["p50"])
            print(f"round {round_} {spec}: p50 {overall['p50']} p95 {overall['p95']} errors {result['errors']}")
    for spec, values in p50s.items():
        print(f"{spec}: p50 per round {values}, median {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
