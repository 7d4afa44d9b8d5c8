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


# The steps of memory_search timed inclusively (SQL + ORM + Python), by patching module globals.
STEP_NAMES = [
    "text_candidates",
    "add_dense_candidates",
    "memories_by_id",
    "memory_statuses",
    "render_context",
    "_record",
]
# What the search waits for on other threads and connections, and the masking of the query.
WAITS = ["embed query (waited for)", "mask query", "dense on side connection (waited for)"]


class _Instruments:
    """The search's helpers wrapped in place so that each call's milliseconds are kept: the query's
    embedding (on the helper thread, overlapping the text candidates) and what the search waited for
    it, the masking of the query, the dense statement built for the side connection (outside the
    recorder of the request's connection) and what the search waited for its rows, and each of
    ``STEP_NAMES``. ``restore`` puts the originals back."""

    def __init__(self, S, backend):
        self.S, self.backend = S, backend
        self.embed: list[float] = []
        self.wait: list[float] = []
        self.mask: list[float] = []
        self.side_statements: list[tuple[str, list]] = []
        self.side_waits: list[float] = []
        self.steps: dict[str, list[float]] = {name: [] for name in STEP_NAMES}
        self.original_embed, self.original_mask = backend.embed_query, S.mask_query
        self.original_background = S.embed_query_in_background
        self.original_statement, self.original_side = S.dense_statement, S.dense_rows_in_background
        self.originals = {name: getattr(S, name) for name in STEP_NAMES}
        backend.embed_query = _timed(self.embed, self.original_embed)
        S.mask_query = _timed(self.mask, self.original_mask)
        S.embed_query_in_background = lambda *args: _TimedResult(self.original_background(*args), self.wait)
        S.dense_statement, S.dense_rows_in_background = self._recorded_statement, self._timed_side
        for name in STEP_NAMES:
            setattr(S, name, _timed(self.steps[name], self.originals[name]))

    def _recorded_statement(self, *args, **kwargs):
        built = self.original_statement(*args, **kwargs)
        self.side_statements.append(built)
        return built

    def _timed_side(self, *args, **kwargs):
        future = self.original_side(*args, **kwargs)
        return _TimedResult(future, self.side_waits) if future is not None else None

    def restore(self) -> None:
        S = self.S
        self.backend.embed_query, S.mask_query = self.original_embed, self.original_mask
        S.embed_query_in_background = self.original_background
        S.dense_statement, S.dense_rows_in_background = self.original_statement, self.original_side
        for name, fn in self.originals.items():
            setattr(S, name, fn)

    def marks(self) -> dict[str, int]:
        """How many calls each list holds now: ``since`` sums what came after."""
        lists = {"embed": self.embed, "wait": self.wait, "mask": self.mask, "side_waits": self.side_waits}
        return {name: len(v) for name, v in (lists | {"side": self.side_statements} | self.steps).items()}

    def since(self, marks: dict[str, int], name: str) -> float:
        return sum(getattr(self, name)[marks[name] :])

    def step_since(self, marks: dict[str, int], name: str) -> float:
        return sum(self.steps[name][marks[name] :])


def _one_request(item: dict) -> tuple[Recorder, dict[str, float]]:
    """One search as the view makes it (authenticate, search, represent, commit) with every SQL
    statement of the request's connection recorded; the clock readings between the parts."""
    from django.db import connection, transaction

    from memory_service.memories.api.views import represent
    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_principal

    recorder = Recorder()
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
    return recorder, {"start": t0, "auth": t_auth, "search": t_search, "body": t_body, "end": t_end}


def _steps(clock: dict, timed: _Instruments, marks: dict) -> dict[str, float]:
    """Milliseconds of each step of one request, the rest of ``memory_search`` last."""
    step = {
        "authenticate_token": (clock["auth"] - clock["start"]) * 1000,
        "represent (view)": (clock["body"] - clock["search"]) * 1000,
        "commit": (clock["end"] - clock["body"]) * 1000,
        "embed query (overlapped)": timed.since(marks, "embed"),
        "embed query (waited for)": timed.since(marks, "wait"),
        "mask query": timed.since(marks, "mask"),
        "dense on side connection (waited for)": timed.since(marks, "side_waits"),
    }
    for name in STEP_NAMES:
        step[name] = timed.step_since(marks, name)
    step["memory_search (rest: scope, fetch hits, fusion)"] = (clock["search"] - clock["auth"]) * 1000 - sum(
        step[name] for name in [*STEP_NAMES, *WAITS]
    )
    return step


def _parts(recorder: Recorder, clock: dict, timed: _Instruments, marks: dict, total: float) -> dict[str, float]:
    """Milliseconds of one request by SQL statement class, the waits and the commit, Python the rest."""
    per = defaultdict(float)
    for cls, ms, _sql, _params in recorder.events:
        per[cls] += ms
    per["commit"] = (clock["end"] - clock["body"]) * 1000
    per["embed query (waited for)"] = timed.since(marks, "wait")
    per["mask query"] = timed.since(marks, "mask")
    per["dense on side connection (waited for)"] = timed.since(marks, "side_waits")
    per["python (rest)"] = total - sum(per.values())
    return per


def _captured(item: dict, recorder: Recorder, side_statements: list[tuple[str, list]]) -> list[dict]:
    """The candidate statements of one request, with their parameters, to be run again."""
    hnsw = any(cls == "hnsw SET LOCAL" for cls, *_ in recorder.events)
    captured = []
    for sql, params in side_statements:
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
    return captured


def inprocess_breakdown(items: list[dict], max_seconds: float) -> dict:
    """The view's work (auth, search, represent) in this process, with every SQL statement timed:
    milliseconds by part and by step, statements per request, and the candidate statements captured."""
    from django.db import transaction

    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_principal

    timed = _Instruments(S, S.get_backend())
    steps = defaultdict(list)
    parts = defaultdict(list)
    totals, captured, statements = [], [], []
    started = time.monotonic()
    try:
        for item in items[:5]:  # warm-up
            with transaction.atomic():
                token = authenticate_principal(item["token"])
                S.memory_search(principal=token, query=item["query"], user=item["user"], repository=item["repository"])
        timed.embed.clear()
        timed.mask.clear()
        for item in items:
            if time.monotonic() - started > max_seconds:
                break
            marks = timed.marks()
            recorder, clock = _one_request(item)
            total = (clock["end"] - clock["start"]) * 1000
            totals.append(total)
            for key, value in _steps(clock, timed, marks).items():
                steps[key].append(value)
            statements.append(len(recorder.events))
            for key, value in _parts(recorder, clock, timed, marks, total).items():
                parts[key].append(value)
            captured += _captured(item, recorder, timed.side_statements[marks["side"] :])
    finally:
        timed.restore()
    n = len(totals)
    breakdown = {k: {"mean": round(sum(v) / n, 2), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in parts.items()}
    by_step = {k: {"mean": round(sum(v) / n, 2), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in steps.items()}
    queries = summary([float(c) for c in statements])
    return {"total": summary(totals), "parts": breakdown, "steps": by_step, "statements": queries, "captured": captured}
