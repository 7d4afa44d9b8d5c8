"""REST measurements of the search performance suite: search and write latency, the cheapest requests.

Every request goes through the REST API as a client would, so it reads tenant data as the
application role under row-level security. The workloads (who searches what) are built here too.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import defaultdict

import httpx
import numpy as np

from bench._stats import summary
from bench.perf import corpus
from bench.perf.client import BASE_URL, KeepAliveClient

# Searches of another sample sent before the REST search is measured (``phase._rest``).
WARMUP_SEARCHES = 200


def workload(specs, tenants: dict, total: int, n: int, seed: int, *, stratified: bool = False) -> list[dict]:
    """Search requests: (tenant, user, repository, query). Traffic ∝ tenant size unless ``stratified``
    (then ``n`` per size class, tenants uniform within the class). User and repository by Zipf."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    sizes = corpus.tenant_sizes(total)
    classes = [corpus.tenant_class(i, s, total) for i, s in enumerate(sizes)]
    picks: list[int] = []
    if stratified:
        for cls in sorted({c for c, s in zip(classes, sizes, strict=True) if s}):
            members = [i for i, c in enumerate(classes) if c == cls and sizes[i]]
            picks += [rng.choice(members) for _ in range(n)]
    else:
        picks = rng.choices(range(len(specs)), weights=sizes, k=n)
    items = []
    for i in picks:
        spec = specs[i]
        ja = rng.random() < corpus.JA_SHARE
        items.append(
            {
                "tenant": spec.slug,
                "tenant_id": tenants[spec.slug]["tenant_id"],
                "token": tenants[spec.slug]["token"],
                "user": spec.users[nprng.choice(len(spec.users), p=spec.user_weights)],
                "repository": spec.repositories[nprng.choice(len(spec.repositories), p=spec.repo_weights)],
                "query": corpus.make_query(rng, ja=ja),
                "ja": ja,
                "class": classes[i],
                "tenant_rows": sizes[i],
            }
        )
    return items


def http_search(items: list[dict], *, warmup: int, max_seconds: float, also_httpx: bool = False) -> dict:
    """Sequential POST /api/v1/search; the first ``warmup`` requests are not recorded.

    ``also_httpx``: every other request (after the warm-up) goes through ``httpx`` instead, and its
    figures are under "httpx": the two clients compared on interleaved requests of one workload.
    """
    latencies, by_class, errors, degraded, hits = [], defaultdict(list), 0, 0, []
    other: list[float] = []
    started = time.monotonic()
    with KeepAliveClient() as client, httpx.Client(base_url=BASE_URL, timeout=30) as slower:
        for k, item in enumerate(items):
            if time.monotonic() - started > max_seconds:
                break
            through_httpx = also_httpx and k >= warmup and k % 2 == 1
            body = {"query": item["query"], "user": item["user"], "repository": item["repository"]}
            headers = {"Authorization": f"Bearer {item['token']}"}
            t = time.perf_counter()
            response = (slower if through_httpx else client).post("/api/v1/search", json=body, headers=headers)
            ms = (time.perf_counter() - t) * 1000
            if response.status_code != 200:
                errors += 1
                continue
            payload = response.json()
            degraded += bool(payload["degraded"])
            if k < warmup:
                continue
            if through_httpx:
                other.append(ms)
                continue
            latencies.append(ms)
            by_class[item["class"]].append(ms)
            hits.append(len(payload["items"]))
    result = {
        "overall": summary(latencies),
        "by_class": {c: summary(v) for c, v in sorted(by_class.items())},
        "errors": errors,
        "degraded": degraded,
        "mean_items": round(statistics.fmean(hits), 1) if hits else None,
        "seconds": round(time.monotonic() - started, 1),
        "client": "http.client (keep-alive)",
    }
    if also_httpx:
        result["httpx"] = summary(other)
    return result


def http_writes(specs, tenants: dict, total: int, n: int, seed: int, max_seconds: float) -> dict:
    """Sequential POST /api/v1/memories with PII in the text (masked on write); ∝ tenant size."""
    rng = random.Random(seed)
    sizes = corpus.tenant_sizes(total)
    latencies, codes, masked = [], defaultdict(int), 0
    ids = []
    started = time.monotonic()
    with KeepAliveClient() as client:
        for k in range(n + 10):
            if time.monotonic() - started > max_seconds:
                break
            spec = specs[rng.choices(range(len(specs)), weights=sizes)[0]]
            title, text = corpus.make_pii_note(rng, seed * 100_000 + k)
            if rng.random() < 0.45:
                body = {"scope": "user", "user": rng.choice(spec.users)}
            else:
                body = {"scope": "repository", "repository": rng.choice(spec.repositories)}
            body |= {"text": text, "title": title, "kind": rng.choice(list(corpus.KIND_WEIGHTS)), "tags": ["bench"]}
            t = time.perf_counter()
            response = client.post(
                "/api/v1/memories", json=body, headers={"Authorization": f"Bearer {tenants[spec.slug]['token']}"}
            )
            ms = (time.perf_counter() - t) * 1000
            codes[response.status_code] += 1
            if response.status_code in (200, 201):
                data = response.json()
                masked += sum(data.get("pii", {}).values())
                ids.append(data["id"])
            if k >= 10:  # warm-up
                latencies.append(ms)
    return {
        "overall": summary(latencies),
        "status_codes": dict(codes),
        "pii_values_masked": masked,
        "ids": ids,
        "seconds": round(time.monotonic() - started, 1),
    }


def http_baseline(token: str, n: int = 200) -> dict:
    """Latency of the cheapest requests: /healthz (no auth, no DB) and an authenticated one-row list."""
    out = {}
    with KeepAliveClient() as client:
        for name, method, path, headers in (
            ("GET /healthz", "GET", "/healthz", {}),
            ("GET /api/v1/memories?limit=1", "GET", "/api/v1/memories?limit=1", {"Authorization": f"Bearer {token}"}),
        ):
            times = []
            for k in range(n + 10):
                t = time.perf_counter()
                response = client.request(method, path, headers=headers)
                if k >= 10 and response.status_code == 200:
                    times.append((time.perf_counter() - t) * 1000)
            out[name] = summary(times)
    return out
