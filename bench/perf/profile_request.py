"""Where a REST search spends its time inside the server: the ASGI application called in process
(httpx ASGITransport, no socket, no uvicorn), with per-layer timings and a cProfile summary.

    .venv/bin/python -m bench.perf.profile_request [--requests 150] [--size 1000000]

Starts the bench PostgreSQL if it is not running and stops it again if it started it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import statistics
import time

from bench._stats import pct
from bench.perf import corpus, stack
from bench.perf.measure import workload


async def run(app, items, headers_for, path_body) -> list[float]:
    import httpx

    times = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for item in items:
            method, path, body = path_body(item)
            t = time.perf_counter()
            response = await client.request(method, path, json=body, headers=headers_for(item))
            times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, (response.status_code, response.text[:200])
    return times


def measure(*, size: int, requests: int = 60) -> dict:
    """Needs Django set up and the bench database running."""
    from django.core.asgi import get_asgi_application

    import memory_service.asgi as asgi_module

    tenants = json.loads(stack.TOKENS_FILE.read_text())
    specs = corpus.tenant_specs()
    items = workload(specs, tenants, size, requests + 20, seed=4242)

    def auth(item):
        return {"Authorization": f"Bearer {item['token']}"}

    def search(item):
        return (
            "POST",
            "/api/v1/search",
            {"query": item["query"], "user": item["user"], "repository": item["repository"]},
        )

    out = {}
    apps = {"full app (MCP router + Django)": asgi_module.application, "Django ASGI only": get_asgi_application()}
    for name, app in apps.items():
        for label, fn, hdr in (
            ("GET /healthz", lambda i: ("GET", "/healthz", None), lambda i: {}),
            ("GET /api/v1/memories?limit=1", lambda i: ("GET", "/api/v1/memories?limit=1", None), auth),
            ("POST /api/v1/search", search, auth),
        ):
            times = asyncio.run(run(app, items, hdr, fn))[20:]
            out[f"{name} | {label}"] = {
                "p50": pct(times, 0.5),
                "p95": pct(times, 0.95),
                "mean": round(statistics.fmean(times), 2),
            }
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(run(asgi_module.application, items, auth, search))
    profiler.disable()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("cumulative").print_stats(50)
    out["profile_top_cumulative"] = buffer.getvalue()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("tottime").print_stats(40)
    out["profile_top_own_time"] = buffer.getvalue()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--size", type=int, required=True, help="corpus size loaded")
    args = parser.parse_args()
    with stack.database():
        out = measure(size=args.size, requests=args.requests)
        (stack.PROFILE.dir / "profile_request.json").write_text(json.dumps(out, indent=1))
        print(json.dumps({k: v for k, v in out.items() if not k.startswith("profile_")}, indent=1))
        print(out["profile_top_cumulative"][:12000])
        print(out["profile_top_own_time"][:8000])


if __name__ == "__main__":
    main()
