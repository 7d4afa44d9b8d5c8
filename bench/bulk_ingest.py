"""Bulk ingest rate through REST: ``POST /api/v1/memories/bulk`` of 500 notes a request, by web
processes, concurrent clients, masking policy and the masking helper process.

    .venv/bin/python bench/bulk_ingest.py [--requests 3] [--size 500] [--out bench/results/bulk_ingest.md]

Each configuration starts uvicorn with that many worker processes on 127.0.0.1:8036 (rate limits
off), lets each client send one request not counted, then each client sends ``--requests``
requests, one after the other, each client into its own tenant, a new connection per request, the
clients starting half a second apart; the rate is the items created over the wall time from the
first counted request to the last answer. The configurations run twice, the
second pass in reverse order, so the machine's drift hits them alike; both passes are reported.
Notes are 200–300-character English notes naming one person (``bench/_notes.py``),
each unique. No embedding worker runs: the tasks wait in Redis database 13, emptied at the end.

Uses its own embedded PostgreSQL (port 54337, data in .data/bulkingest).
"""

import argparse
import os
import random
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, start_uvicorn, write_section  # noqa: E402

PORT = 8036
STAGGER_S = 0.5
#: (web processes, clients, policy, masking helper process: PII_HELPER_PROCESS)
CONFIGS = [
    (1, 1, "regex + names", True),
    (1, 1, "regex + names", False),
    (2, 1, "regex + names", True),
    (2, 2, "regex + names", True),
    (2, 2, "regex + names", False),
    (1, 1, "regex only", True),
    (2, 2, "regex only", True),
]
#: Seconds given to the web processes' masking helpers to load after the server answers.
HELPER_LOAD_S = 8


def serve(workers: int, helper: bool) -> subprocess.Popen:
    """``workers`` uvicorn processes on PORT without rate limits, once all of them have loaded."""
    env = {"RATE_LIMIT_PER_MINUTE": "0", "AUTH_FAILURES_PER_MINUTE": "0", "PII_HELPER_PROCESS": str(int(helper))}
    process = start_uvicorn(PORT, env=env, workers=workers, attempts=600, probe_timeout=2)
    time.sleep(3 * (workers - 1) + (HELPER_LOAD_S if helper else 0))  # the other processes finish loading
    return process


def run_client(token: str, batches: list[list[dict]], created: list[int], errors: list[str]) -> None:
    import httpx

    # A connection per request: the web processes share one listening socket, so each request goes
    # to whichever process accepts it (a kept-alive connection would stay with one process).
    with httpx.Client(base_url=f"http://127.0.0.1:{PORT}", headers={"Authorization": f"Bearer {token}"},
                      timeout=600, limits=httpx.Limits(max_keepalive_connections=0)) as http:  # fmt: skip
        for items in batches:
            response = http.post("/api/v1/memories/bulk", json={"items": items})
            if response.status_code != 200:
                errors.append(f"{response.status_code}: {response.text[:200]}")
                continue
            created.append(sum(result["status"] == 201 for result in response.json()["results"]))


def measure(workers: int, helper: bool, tokens: list[str], make_batch, requests: int) -> float:
    """Items created per second by ``len(tokens)`` concurrent clients (after one request each)."""
    process = serve(workers, helper)
    try:
        warm: list[int] = []
        errors: list[str] = []
        threads = [threading.Thread(target=run_client, args=(t, [make_batch()], warm, errors)) for t in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        created: list[int] = []
        batches = [[make_batch() for _ in range(requests)] for _ in tokens]
        threads = [
            threading.Thread(target=run_client, args=(token, batch, created, errors))
            for token, batch in zip(tokens, batches, strict=True)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
            # Clients that connect at the same instant are all accepted by the process that wakes
            # first (asyncio accepts every pending connection at once): arrive as agents do, apart.
            time.sleep(STAGGER_S)
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        if errors:
            raise RuntimeError(errors[0])
        return sum(created) / seconds
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3, help="counted requests per client and configuration")
    parser.add_argument("--size", type=int, default=500, help="items per request")
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "bulk_ingest.md"))
    args = parser.parse_args()

    with bench_stack("bulkingest", pg_port=54337, redis_db=13):
        from django.db import connections

        from bench._notes import make_note
        from memory_service.pii import REGEX_ENTITIES
        from memory_service.redis import get_redis
        from tenants.masking import tenant_pii_policy_set
        from tenants.services import tenant_create, token_create

        stamp = int(time.time())
        tokens = {}
        for policy in ("regex + names", "regex only"):
            tokens[policy] = []
            for client in range(2):
                tenant = tenant_create(slug=f"ingest-{policy.split()[-1]}-{client}-{stamp}")
                if policy == "regex only":
                    tenant = tenant_pii_policy_set(tenant=tenant, entities=list(REGEX_ENTITIES))
                tokens[policy].append(token_create(tenant=tenant, actor="system:bench", name="bench").raw)
        connections.close_all()
        rng = random.Random(20261204)
        counter = iter(range(10**9))

        def make_batch() -> list[dict]:
            items = []
            for _ in range(args.size):
                title, text = make_note(rng, "en", next(counter))
                items.append({"scope": "user", "user": "u1", "title": title, "text": text, "tags": ["bench"]})
            return items

        rates: dict[tuple, list[float]] = {config: [] for config in CONFIGS}
        for order in (CONFIGS, list(reversed(CONFIGS))):
            for workers, clients, policy, helper in order:
                rate = measure(workers, helper, tokens[policy][:clients], make_batch, args.requests)
                rates[(workers, clients, policy, helper)].append(rate)
                label = f"{policy}, {workers} web processes, {clients} clients, helper {helper}"
                print(f"{label}: {rate:.0f} memories/s", flush=True)
        get_redis().flushdb()

        lines = [
            "### Bulk ingest through REST: web processes, clients, policy",
            "",
            f"Command: `.venv/bin/python bench/bulk_ingest.py --requests {args.requests} --size {args.size}` — "
            f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores. Requests of {args.size} English notes "
            f"(one person named in each), {args.requests} counted requests per client after one that is not; "
            "memories created per second of wall time; two passes, the second in reverse order. Helper: "
            "each web process's masking helper process (`PII_HELPER_PROCESS`, the default on two cores) "
            "masks the later parts of a batch while the web process masks the first and stores each part; "
            "given 8 s to load after the server answers.",
            "",
            "| policy | web processes | clients | helper | memories/s, pass 1 | pass 2 |",
            "|---|---|---|---|---|---|",
            *[
                f"| {policy} | {workers} | {clients} | {'on' if helper else 'off'} | "
                f"{rates[config][0]:.0f} | {rates[config][1]:.0f} |"
                for config in CONFIGS
                for workers, clients, policy, helper in [config]
            ],
        ]
        figures = [
            (
                f"bulk ingest through REST ({args.size} notes a request), {policy}, {workers} web "
                f"process{'es' if workers > 1 else ''}, {clients} client{'s' if clients > 1 else ''}, "
                f"masking helper {'on' if helper else 'off'}",
                f"{min(rates[config]):.0f}–{max(rates[config]):.0f} memories/s",
                "≥ 300/s" if policy == "regex + names" else "≥ 500/s",
            )
            for config in CONFIGS
            for workers, clients, policy, helper in [config]
        ]
        write_section(args.out, lines + [""], figures)


if __name__ == "__main__":
    main()
