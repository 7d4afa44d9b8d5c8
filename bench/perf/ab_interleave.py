"""REST latency of two frozen copies of the application, request by request.

    .venv/bin/python -m bench.perf.ab_interleave .data/bench/app-<old> .data/bench/app-<new> [--size 10000]
    .venv/bin/python -m bench.perf.ab_interleave <old> <new> --size 10000 --endpoints list,context,get

Where ``ab_rest`` alternates whole runs (one server at a time, ~30 s each), this serves both
copies at once, the first on 127.0.0.1:8030 and the second on 8031, and sends every request to
one and then the other (which goes first alternates), so both meet the same state of the shared
machine, whose speed drifts by tens of percent between runs. Searches: the same 400 queries to
both (30 more first, not counted). Writes: ``--writes`` pairs of distinct notes with PII in
them, one of each pair to each server (10 pairs more first, not counted): the same text twice
would be answered as a duplicate. Reads (``--endpoints list,context,get``), taken in turn
request by request, each sent to both servers: ``list`` GET /api/v1/memories?limit=50 with the
token of the search workload's tenant; ``context`` GET /api/v1/context with its user and
repository (users and repositories that own memories in the corpus; every distinct pair is
asked of both servers once first, not counted, so the first read's render of a digest is never
timed); ``get`` GET /api/v1/memories/{id} of a memory of that tenant, drawn from one list call
per tenant at the start (tenants without memories are skipped). 30 of each first, not counted.
Both servers run with the rate limits off (as in ``ab_rest``).
The memories written are deleted at the end and the bench Redis db emptied of their tasks.
Needs the bench database running with a corpus loaded, as ``ab_rest`` does.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode

from bench._stats import summary
from bench.perf import corpus, measure, stack
from bench.perf.ab_rest import NO_LIMITS, delete_written, variant
from bench.perf.client import KeepAliveClient

PORTS = (stack.WEB_PORT, stack.WEB_PORT + 1)
READS = ("list", "context", "get")
ENDPOINTS = ("search", "write", *READS)


def write_body(rng: random.Random, specs, sizes, number: int) -> tuple[str, dict]:
    """(tenant slug, body) of one POST /api/v1/memories, as ``measure.http_writes`` builds them."""
    spec = specs[rng.choices(range(len(specs)), weights=sizes)[0]]
    title, text = corpus.make_pii_note(rng, number)
    if rng.random() < 0.45:
        body = {"scope": "user", "user": rng.choice(spec.users)}
    else:
        body = {"scope": "repository", "repository": rng.choice(spec.repositories)}
    body |= {"text": text, "title": title, "kind": rng.choice(list(corpus.KIND_WEIGHTS)), "tags": ["bench"]}
    return spec.slug, body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs=2, help="DIR[@NAME=VALUE,...]: first the baseline")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    parser.add_argument("--endpoints", default="search,write", help=f"comma-separated, of {','.join(ENDPOINTS)}")
    args = parser.parse_args()
    endpoints = args.endpoints.split(",")
    if unknown := set(endpoints) - set(ENDPOINTS):
        parser.error(f"unknown endpoints {sorted(unknown)}")
    specs = corpus.tenant_specs()
    sizes = corpus.tenant_sizes(args.size)
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(specs, tenants, args.size, args.requests + 30, seed=args.size)
    latencies: dict[tuple[str, str], list[float]] = defaultdict(list)
    paired: dict[str, list[float]] = defaultdict(list)  # (second - first) per request sent to both
    codes: dict[str, dict[int, int]] = {spec: defaultdict(int) for spec in args.variants}
    ids: list[str] = []
    processes, clients = [], {}
    try:
        for spec, port in zip(args.variants, PORTS, strict=True):
            app_dir, env = variant(spec)
            processes.append(stack.start_web(extra_env=NO_LIMITS | env, app_dir=Path(app_dir), port=port))
            clients[spec] = KeepAliveClient(f"http://127.0.0.1:{port}")

        def send(spec: str, path: str, body: dict | None, token: str, kind: str, counted: bool) -> float | None:
            started = time.perf_counter()
            headers = {"Authorization": f"Bearer {token}"}
            if body is None:
                response = clients[spec].request("GET", path, headers=headers)
            else:
                response = clients[spec].post(path, json=body, headers=headers)
            ms = (time.perf_counter() - started) * 1000
            codes[spec][response.status_code] += 1
            if kind == "write" and response.status_code in (200, 201):
                ids.append(response.json()["id"])
            if counted and response.status_code in (200, 201):
                latencies[kind, spec].append(ms)
                return ms
            return None

        def send_both(k: int, path: str, body: dict | None, token: str, kind: str, counted: bool) -> None:
            order = args.variants if k % 2 == 0 else reversed(args.variants)
            ms = {spec: send(spec, path, body, token, kind, counted) for spec in order}
            if None not in ms.values():
                paired[kind].append(ms[args.variants[1]] - ms[args.variants[0]])

        if "search" in endpoints:
            for k, item in enumerate(items):
                body = {"query": item["query"], "user": item["user"], "repository": item["repository"]}
                send_both(k, "/api/v1/search", body, item["token"], "search", k >= 30)
        reads = [kind for kind in READS if kind in endpoints]
        if reads:
            # Memory ids per tenant, for ``get``: one list call each, not counted.
            memory_ids: dict[str, list[str]] = {}
            for item in items:
                if item["tenant"] not in memory_ids:
                    response = clients[args.variants[0]].request(
                        "GET", "/api/v1/memories?limit=100", headers={"Authorization": f"Bearer {item['token']}"}
                    )
                    memory_ids[item["tenant"]] = [m["id"] for m in response.json()["results"]]
            rng = random.Random(args.size + 2)
            paths = {
                "list": lambda item: "/api/v1/memories?limit=50",
                "context": lambda item: (
                    "/api/v1/context?" + urlencode({"user": item["user"], "repository": item["repository"]})
                ),
                "get": lambda item: f"/api/v1/memories/{rng.choice(memory_ids[item['tenant']])}",
            }
            if "context" in reads:  # every digest rendered and stored before any is timed
                for token, path in {(item["token"], paths["context"](item)) for item in items}:
                    for spec in args.variants:
                        send(spec, path, None, token, "context", False)
            for kind in reads:  # warm-up, not counted
                for k, item in enumerate(items[:30]):
                    if kind != "get" or memory_ids[item["tenant"]]:
                        send_both(k, paths[kind](item), None, item["token"], kind, False)
            for k, item in enumerate(items[30:]):
                for kind in reads:
                    if kind != "get" or memory_ids[item["tenant"]]:
                        send_both(k, paths[kind](item), None, item["token"], kind, True)
        rng = random.Random(args.size + 1)
        for k in range(args.writes + 10 if "write" in endpoints else 0):
            pair = [write_body(rng, specs, sizes, 2 * k + j) for j in range(2)]
            order = args.variants if k % 2 == 0 else list(reversed(args.variants))
            for spec, (slug, body) in zip(order, pair, strict=True):
                send(spec, "/api/v1/memories", body, tenants[slug]["token"], "write", k >= 10)
    finally:
        for client in clients.values():
            client.close()
        for process in processes:
            stack.stop_process(process)
        deleted = delete_written(ids) if ids else 0
    first, second = args.variants
    out = {"codes": {spec: dict(c) for spec, c in codes.items()}, "deleted": deleted}
    for kind in endpoints:
        figures = {spec: summary(latencies[kind, spec]) for spec in args.variants}
        out[kind] = figures | {
            "ratio_p50": round(figures[second]["p50"] / figures[first]["p50"], 3),
            "ratio_p95": round(figures[second]["p95"] / figures[first]["p95"], 3),
            "ratio_mean": round(figures[second]["mean"] / figures[first]["mean"], 3),
            "diff_p50_ms": round(figures[second]["p50"] - figures[first]["p50"], 2),
            "diff_p95_ms": round(figures[second]["p95"] - figures[first]["p95"], 2),
        }
        if paired[kind]:  # the median of the per-request differences, second - first
            out[kind]["paired_median_diff_ms"] = round(statistics.median(paired[kind]), 2)
        for spec in args.variants:
            print(f"{kind} {spec}: {figures[spec]}")
        print(
            f"{kind} {second} vs {first}: p50 {out[kind]['ratio_p50']} ({out[kind]['diff_p50_ms']:+} ms)"
            f" p95 {out[kind]['ratio_p95']} ({out[kind]['diff_p95_ms']:+} ms)"
            f" paired median {out[kind].get('paired_median_diff_ms')} ms"
        )
    print(f"status codes {out['codes']}, deleted {deleted}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args)} | out, indent=1))


if __name__ == "__main__":
    main()
