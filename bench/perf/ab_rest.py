"""REST search latency of two (or more) frozen copies of the application, alternated on one database.

    .venv/bin/python -m bench.perf.ab_rest .data/bench/app-<old> .data/bench/app-<new> [--rounds 4]

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("app_dirs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    args = parser.parse_args()
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(corpus.tenant_specs(), tenants, args.size, args.requests + 30, seed=args.size)
    p50s: dict[str, list[float]] = {str(d): [] for d in args.app_dirs}
    for round_ in range(args.rounds):
        for app_dir in args.app_dirs if round_ % 2 == 0 else list(reversed(args.app_dirs)):
            process = stack.start_web(app_dir=app_dir.resolve())
            try:
                result = measure.http_search(items, warmup=30, max_seconds=600)
            finally:
                stack.stop_process(process)
            overall = result["overall"]
            p50s[str(app_dir)].append(overall["p50"])
            print(f"round {round_} {app_dir.name}: p50 {overall['p50']} p95 {overall['p95']} errors {result['errors']}")
    for app_dir, values in p50s.items():
        print(f"{Path(app_dir).name}: p50 per round {values}, median {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
