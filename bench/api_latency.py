"""Warm request latency of search over REST and of MCP tool calls over streamable HTTP, side by side.

Seeds one tenant with N memories (embedded), serves the whole ASGI application with uvicorn on a
loopback port, then times sequential requests from this process:

    .venv/bin/python bench/api_latency.py [--memories 2000] [--requests 300]

Uses its own embedded PostgreSQL (port 54332, data in .data/latency) and Redis database 7.
"""

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, start_uvicorn, write_section  # noqa: E402
from bench._stats import percentiles  # noqa: E402

TOPICS = [
    "connection pool", "flaky test", "deploy", "migration", "cache", "rate limit", "feature flag", "CI",
    "logging", "retry", "timeout", "schema", "index", "queue", "auth token", "i18n", "docker", "backup",
]  # fmt: skip
ACTIONS = ["raise", "lower", "pin", "document", "monitor", "remove", "split", "rename", "retry", "cache"]


def seed(count: int) -> str:
    from memory_service.memories.embedding import embed_memories, pending_memory_ids
    from memory_service.memories.services import memory_create
    from tenants.access import Principal
    from tenants.context import tenant_context
    from tenants.services import tenant_create, token_create

    tenant = tenant_create(slug=f"lat-{int(time.time())}")
    issued = token_create(
        tenant=tenant, actor="system:bench", name="bench", permissions=["memory:read", "memory:write"]
    )
    rng = random.Random(7)
    principal = Principal.operator(tenant=tenant, actor="system:bench")
    with tenant_context(tenant.id):
        for i in range(count):
            topic, action = rng.choice(TOPICS), rng.choice(ACTIONS)
            memory_create(
                principal=principal, scope="repository", repository=f"repo-{i % 4}",
                kind=rng.choice(["lesson", "note"]),
                text=f"Note {i}: for the {topic} we decided to {action} it after incident {rng.randint(1, 999)}.",
            )  # fmt: skip
        ids = pending_memory_ids(tenant_id=str(tenant.id), limit=count)
        for start in range(0, len(ids), 128):
            embed_memories(tenant_id=str(tenant.id), memory_ids=ids[start : start + 128])
    return issued.raw


def serve(port: int) -> subprocess.Popen:
    """The application under uvicorn on ``port``, without rate limits."""
    return start_uvicorn(port, env={"PUBLIC_BASE_URL": f"http://127.0.0.1:{port}", "RATE_LIMIT_PER_MINUTE": "0"})


def time_rest(url: str, token: str, requests: int) -> list[float]:
    import httpx

    rng = random.Random(1)
    samples = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        for i in range(requests + 20):
            body = {"query": f"{rng.choice(TOPICS)} {rng.choice(ACTIONS)}", "repository": f"repo-{i % 4}"}
            started = time.perf_counter()
            response = http.post("/api/v1/search", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, response.text
            if i >= 20:  # warm-up excluded
                samples.append(elapsed)
    return samples


def time_mcp(url: str, token: str, requests: int) -> list[float]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> list[float]:
        rng = random.Random(1)
        samples = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            Client(streamable_http_client(f"{url}/mcp/", http_client=http)) as client,
        ):
            for i in range(requests + 20):
                args = {"query": f"{rng.choice(TOPICS)} {rng.choice(ACTIONS)}", "repository": f"repo-{i % 4}"}
                started = time.perf_counter()
                result = await client.call_tool("search_memory", args)
                elapsed = (time.perf_counter() - started) * 1000
                assert not result.is_error
                if i >= 20:
                    samples.append(elapsed)
        return samples

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "api_latency.md"))
    args = parser.parse_args()
    with bench_stack("latency", pg_port=54332, redis_db=7):
        started = time.perf_counter()
        token = seed(args.memories)
        seeded_s = time.perf_counter() - started
        from django.db import connections

        with connections["admin"].cursor() as cursor:
            cursor.execute("ANALYZE")  # fresh statistics after the load, as after any bulk import
        connections.close_all()
        for connection in connections.all():
            connection.close_pool()
        port = 8032
        server = serve(port)
        try:
            url = f"http://127.0.0.1:{port}"
            rest = time_rest(url, token, args.requests)
            mcp = time_mcp(url, token, args.requests)
        finally:
            server.terminate()
            server.wait(timeout=30)
    rows, figures = [], []
    for name, samples in (("REST `POST /api/v1/search`", rest), ("MCP `tools/call search_memory`", mcp)):
        p50, p95, p99 = percentiles(samples)
        rows.append(f"| {name} | {len(samples)} | {p50:.1f} | {p95:.1f} | {p99:.1f} |")
        figures.append((f"{name}, {args.memories:,} memories, warm", f"p50 {p50:.1f} ms, p95 {p95:.1f} ms", ""))
    report = [
        "## API latency: REST search and MCP tool calls",
        "",
        f"Command: `.venv/bin/python bench/api_latency.py --memories {args.memories} --requests {args.requests}` — "
        f"{datetime.now():%Y-%m-%d}, {os.cpu_count()} cores. One tenant, {args.memories} embedded memories over 4 "
        f"repositories (seeded through the write path with masking in {seeded_s:.0f} s); one uvicorn process; "
        "ANALYZE after the load; sequential warm requests from a second process on loopback (20 warm-up "
        "requests excluded).",
        "",
        "| interface | requests | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    write_section(args.out, report, figures)


if __name__ == "__main__":
    main()
