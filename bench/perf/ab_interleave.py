"""REST latency of two frozen copies of the application, request by request.

    .venv/bin/python -m bench.perf.ab_interleave .data/bench/app-<old> .data/bench/app-<new> [--size 10000]
    .venv/bin/python -m bench.perf.ab_interleave <old> <new> --size 10000 --endpoints list,context,get

Where ``ab_rest`` alternates whole runs (one server at a time), this serves both
copies at once, the first on 127.0.0.1:8030 and the second on 8031, and sends every request to
one and then the other (which goes first alternates), so both meet the same state of the shared
machine, whose speed drifts between runs. Searches: the same 400 queries to
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


class Interleaved:
    """The two servers' clients, and what their requests answered: status codes, counted latencies
    by (kind, variant), the per-request differences (second - first) and the ids written."""

    def __init__(self, variants: list[str], clients: dict):
        self.variants, self.clients = variants, clients
        self.latencies: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.paired: dict[str, list[float]] = defaultdict(list)  # (second - first) per request sent to both
        self.codes: dict[str, dict[int, int]] = {spec: defaultdict(int) for spec in variants}
        self.ids: list[str] = []

    def send(self, spec: str, path: str, body: dict | None, token: str, kind: str, counted: bool) -> float | None:
        started = time.perf_counter()
        headers = {"Authorization": f"Bearer {token}"}
        if body is None:
            response = self.clients[spec].request("GET", path, headers=headers)
        else:
            response = self.clients[spec].post(path, json=body, headers=headers)
        ms = (time.perf_counter() - started) * 1000
        self.codes[spec][response.status_code] += 1
        if kind == "write" and response.status_code in (200, 201):
            self.ids.append(response.json()["id"])
        if counted and response.status_code in (200, 201):
            self.latencies[kind, spec].append(ms)
            return ms
        return None

    def send_both(self, k: int, path: str, body: dict | None, token: str, kind: str, counted: bool) -> None:
        order = self.variants if k % 2 == 0 else reversed(self.variants)
        ms = {spec: self.send(spec, path, body, token, kind, counted) for spec in order}
        if None not in ms.values():
            self.paired[kind].append(ms[self.variants[1]] - ms[self.variants[0]])


def searches(run: Interleaved, items: list[dict]) -> None:
    for k, item in enumerate(items):
        body = {"query": item["query"], "user": item["user"], "repository": item["repository"]}
        run.send_both(k, "/api/v1/search", body, item["token"], "search", k >= 30)


def reads(run: Interleaved, items: list[dict], kinds: list[str], seed: int) -> None:
    """The read endpoints ``kinds`` on every item: 30 not counted first, then the rest."""
    # Memory ids per tenant, for ``get``: one list call each, not counted.
    memory_ids: dict[str, list[str]] = {}
    for item in items:
        if item["tenant"] not in memory_ids:
            response = run.clients[run.variants[0]].request(
                "GET", "/api/v1/memories?limit=100", headers={"Authorization": f"Bearer {item['token']}"}
            )
            memory_ids[item["tenant"]] = [m["id"] for m in response.json()["results"]]
    rng = random.Random(seed)
    paths = {
        "list": lambda item: "/api/v1/memories?limit=50",
        "context": lambda item: (
            "/api/v1/context?" + urlencode({"user": item["user"], "repository": item["repository"]})
        ),
        "get": lambda item: f"/api/v1/memories/{rng.choice(memory_ids[item['tenant']])}",
    }
    if "context" in kinds:  # every digest rendered and stored before any is timed
        for token, path in {(item["token"], paths["context"](item)) for item in items}:
            for spec in run.variants:
                run.send(spec, path, None, token, "context", False)
    for kind in kinds:  # warm-up, not counted
        for k, item in enumerate(items[:30]):
            if kind != "get" or memory_ids[item["tenant"]]:
                run.send_both(k, paths[kind](item), None, item["token"], kind, False)
    for k, item in enumerate(items[30:]):
        for kind in kinds:
            if kind != "get" or memory_ids[item["tenant"]]:
                run.send_both(k, paths[kind](item), None, item["token"], kind, True)


def writes(run: Interleaved, count: int, *, specs, sizes, tenants: dict, seed: int) -> None:
    """``count`` pairs of writes (10 more first, not counted), one of each pair to each server."""
    rng = random.Random(seed)
    for k in range(count + 10):
        pair = [write_body(rng, specs, sizes, 2 * k + j) for j in range(2)]
        order = run.variants if k % 2 == 0 else list(reversed(run.variants))
        for spec, (slug, body) in zip(order, pair, strict=True):
            run.send(spec, "/api/v1/memories", body, tenants[slug]["token"], "write", k >= 10)


def figures(run: Interleaved, endpoints: list[str], deleted: int) -> dict:
    """Each endpoint's figures per variant, the second's ratios and differences to the first (printed)."""
    first, second = run.variants
    out = {"codes": {spec: dict(c) for spec, c in run.codes.items()}, "deleted": deleted}
    for kind in endpoints:
        by_variant = {spec: summary(run.latencies[kind, spec]) for spec in run.variants}
        out[kind] = by_variant | {
            "ratio_p50": round(by_variant[second]["p50"] / by_variant[first]["p50"], 3),
            "ratio_p95": round(by_variant[second]["p95"] / by_variant[first]["p95"], 3),
            "ratio_mean": round(by_variant[second]["mean"] / by_variant[first]["mean"], 3),
            "diff_p50_ms": round(by_variant[second]["p50"] - by_variant[first]["p50"], 2),
            "diff_p95_ms": round(by_variant[second]["p95"] - by_variant[first]["p95"], 2),
        }
        if run.paired[kind]:  # the median of the per-request differences, second - first
            out[kind]["paired_median_diff_ms"] = round(statistics.median(run.paired[kind]), 2)
        for spec in run.variants:
            print(f"{kind} {spec}: {by_variant[spec]}")
        print(
            f"{kind} {second} vs {first}: p50 {out[kind]['ratio_p50']} ({out[kind]['diff_p50_ms']:+} ms)"
            f" p95 {out[kind]['ratio_p95']} ({out[kind]['diff_p95_ms']:+} ms)"
            f" paired median {out[kind].get('paired_median_diff_ms')} ms"
        )
    return out


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
    processes, clients = [], {}
    run = Interleaved(args.variants, clients)
    try:
        for spec, port in zip(args.variants, PORTS, strict=True):
            app_dir, env = variant(spec)
            processes.append(stack.start_web(extra_env=NO_LIMITS | env, app_dir=Path(app_dir), port=port))
            clients[spec] = KeepAliveClient(f"http://127.0.0.1:{port}")
        if "search" in endpoints:
            searches(run, items)
        kinds = [kind for kind in READS if kind in endpoints]
        if kinds:
            reads(run, items, kinds, seed=args.size + 2)
        if "write" in endpoints:
            writes(run, args.writes, specs=specs, sizes=sizes, tenants=tenants, seed=args.size + 1)
    finally:
        for client in clients.values():
            client.close()
        for process in processes:
            stack.stop_process(process)
        deleted = delete_written(run.ids) if run.ids else 0
    out = figures(run, endpoints, deleted)
    print(f"status codes {out['codes']}, deleted {deleted}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args)} | out, indent=1))


if __name__ == "__main__":
    main()
