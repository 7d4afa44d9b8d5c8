"""The fixed cost of the web stack: Django's ASGI handler against its WSGI handler run by a2wsgi
(as deployed, ``memory_service/asgi.py``), the same requests in one run.

    .venv/bin/python bench/web_stack.py [--memories 1000] [--rounds 8] [--per-round 25]

Seeds one tenant with N embedded memories, then calls both applications in process (httpx
ASGITransport: no socket, no uvicorn), alternating rounds so that machine noise hits both alike:
``GET /healthz``, a one-row list, a write with masking and a search. Uses its own embedded
PostgreSQL (port 54336, data in .data/webstack) and Redis database 11.
"""

import argparse
import asyncio
import os
import random
import sys
import time
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, write_section  # noqa: E402
from bench._stats import percentiles  # noqa: E402
from bench.api_latency import ACTIONS, TOPICS, seed  # noqa: E402


def requests_for(token: str, rng: random.Random) -> dict:
    """name → a function returning (method, path, JSON body) for the next request of that kind."""
    counter = iter(range(10**9))

    def write():
        topic, action = rng.choice(TOPICS), rng.choice(ACTIONS)
        text = f"Web stack {next(counter)}: {action} the {topic}; ask ops@example.com, call 090-1234-5678."
        return "POST", "/api/v1/memories", {"scope": "repository", "repository": "repo-web", "text": text}

    def search():
        query = f"how did we {rng.choice(ACTIONS)} the {rng.choice(TOPICS)}"
        return "POST", "/api/v1/search", {"query": query, "repository": f"repo-{rng.randrange(4)}"}

    return {
        "GET /healthz": lambda: ("GET", "/healthz", None),
        "GET /api/v1/memories?limit=1": lambda: ("GET", "/api/v1/memories?limit=1", None),
        "POST /api/v1/memories": write,
        "POST /api/v1/search": search,
    }


async def _round(app, token: str, make, count: int) -> list[float]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    times = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for _ in range(count):
            method, path, body = make()
            started = time.perf_counter()
            response = await client.request(method, path, json=body, headers=headers)
            times.append((time.perf_counter() - started) * 1000)
            if response.status_code not in (200, 201):
                raise SystemExit(f"{method} {path}: {response.status_code} {response.text[:200]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=8, help="rounds per handler; the first is a warm-up")
    parser.add_argument("--per-round", type=int, default=25, help="requests of each kind per round")
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "web_stack.md"))
    args = parser.parse_args()
    os.environ["RATE_LIMIT_PER_MINUTE"] = "0"  # one token sends every request
    os.environ["LOG_LEVEL"] = "WARNING"  # as in the other benchmarks: no log line per request

    with bench_stack("webstack", pg_port=54336, redis_db=11):
        from a2wsgi import WSGIMiddleware
        from django.conf import settings
        from django.core.asgi import get_asgi_application
        from django.core.wsgi import get_wsgi_application

        started = time.monotonic()
        token = seed(args.memories)
        seeded_s = time.monotonic() - started
        apps = {
            "Django ASGI handler": get_asgi_application(),
            "WSGI handler in a2wsgi (deployed)": WSGIMiddleware(
                get_wsgi_application(), workers=settings.DB_POOL_MAX_SIZE
            ),
        }
        rng = random.Random(11)
        kinds = requests_for(token, rng)
        times: dict[tuple[str, str], list[float]] = {}
        for round_no in range(args.rounds):
            for app_name, app in apps.items():
                for kind, make in kinds.items():
                    measured = asyncio.run(_round(app, token, make, args.per_round))
                    if round_no:  # the first round warms both up
                        times.setdefault((kind, app_name), []).extend(measured)

    report = [
        "## Web stack: Django's ASGI handler against its WSGI handler in a2wsgi",
        "",
        f"Command: `.venv/bin/python bench/web_stack.py --memories {args.memories} --rounds {args.rounds} "
        f"--per-round {args.per_round}` — {datetime.now():%Y-%m-%d %H:%M}, 2 cores. One tenant with "
        f"{args.memories} embedded memories (seeded in {seeded_s:.0f} s); both applications called in process "
        "(no socket), alternating rounds, the first round of each not counted.",
        "",
        "| request | handler | n | p50 / p95 / p99 ms |",
        "|---|---|---|---|",
    ]
    medians = {}
    for (kind, app_name), samples in times.items():
        p50, p95, p99 = percentiles(samples)
        medians[(kind, app_name)] = p50
        report.append(f"| {kind} | {app_name} | {len(samples)} | {p50:.1f} / {p95:.1f} / {p99:.1f} |")
    asgi, wsgi = list(apps)
    change = ", ".join(f"{kind} {medians[(kind, asgi)]:.1f} → {medians[(kind, wsgi)]:.1f} ms" for kind in kinds)
    figures = [("web stack in process, p50: Django's ASGI handler → its WSGI handler in a2wsgi (deployed)", change, "")]
    write_section(args.out, report, figures)


if __name__ == "__main__":
    main()
