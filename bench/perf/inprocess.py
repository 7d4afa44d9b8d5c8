"""The in-process breakdown of a search: the view's work step by step, every SQL statement timed.

Runs as the application role under row-level security, in-process through
``authenticate_principal`` inside a transaction, exactly as a request.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import contextmanager

from bench._stats import pct, summary


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
