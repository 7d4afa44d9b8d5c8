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
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.perf import corpus, measure, stack
from memory_service import devstack


def serve(app_dir: Path) -> subprocess.Popen:
    env = os.environ | {
        "ENV_FILE": str(stack.PROFILE.env_file),
        "DJANGO_SETTINGS_MODULE": "memory_service.settings.base",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    uvicorn = Path(sys.executable).parent / "uvicorn"
    process = subprocess.Popen(
        [str(uvicorn), "memory_service.asgi:application", "--host", "127.0.0.1", "--port", str(stack.WEB_PORT)],
        cwd=app_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not devstack.port_is_open(stack.WEB_PORT):
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"uvicorn from {app_dir} did not start")
        time.sleep(0.5)
    return process


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("app_dirs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    args = parser.parse_args()
    if devstack.port_is_open(stack.WEB_PORT):
        raise SystemExit(f"port {stack.WEB_PORT} is taken")
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(corpus.tenant_specs(), tenants, args.size, args.requests + 30, seed=args.size)
    p50s: dict[str, list[float]] = {str(d): [] for d in args.app_dirs}
    for round_ in range(args.rounds):
        for app_dir in args.app_dirs if round_ % 2 == 0 else list(reversed(args.app_dirs)):
            process = serve(app_dir.resolve())
            try:
                result = measure.http_search(items, warmup=30, max_seconds=600)
            finally:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
            overall = result["overall"]
            p50s[str(app_dir)].append(overall["p50"])
            print(f"round {round_} {app_dir.name}: p50 {overall['p50']} p95 {overall['p95']} errors {result['errors']}")
    for app_dir, values in p50s.items():
        print(f"{Path(app_dir).name}: p50 per round {values}, median {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
