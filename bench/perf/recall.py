"""Recall@10 of the app's dense stage and of HNSW variants, against an exact scan of the same scope."""

from __future__ import annotations

import functools
import statistics
import time
from collections import defaultdict

from bench._stats import pct, summary
from bench.perf.inprocess import tenant_tx
from bench.perf.load import HNSW_INDEX
from bench.perf.plans import KnnPlans, hnsw_settings

# The app's own setting (candidates.HNSW_SETTINGS) is ef_search 200 with relaxed iterative scan.
HNSW_VARIANTS = [
    ("hnsw ef=40 relaxed", 40, "relaxed_order"),
    ("hnsw ef=100 relaxed", 100, "relaxed_order"),
    ("hnsw ef=200 relaxed (app)", 200, "relaxed_order"),
    ("hnsw ef=400 relaxed", 400, "relaxed_order"),
    ("hnsw ef=200 no iterative", 200, "off"),
]


def dense_qs(scoped, token, vector, backend):
    """The k-NN of a large scope as the app asks it (memory_service.retrieval.candidates.hnsw_statement), as a
    queryset, unordered."""
    from django.db.models.functions import Cast
    from pgvector.django import CosineDistance, VectorField

    from memory_service.memories.models import MemoryEmbedding

    distance = CosineDistance(Cast("embedding", output_field=VectorField(dimensions=backend.dimension)), vector)
    rows = MemoryEmbedding.objects.for_tenant(token.tenant).filter(model=backend.model_id, memory__in=scoped)
    return rows.annotate(distance=distance)


def recall_at_k(found: list[tuple], exact: list[tuple], k: int = 10) -> float | None:
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
    """For each search of ``items`` (until ``max_seconds``): the app's dense stage (its path, time,
    and for the HNSW path whether the plan read the index), an exact scan of the same scope, and
    each of ``HNSW_VARIANTS``; recall@10 of each against the exact scan. Rows and their summary."""
    from memory_service.retrieval import search as S

    backend = S.get_backend()
    rows = []
    started = time.monotonic()
    for item in items:
        if time.monotonic() - started > max_seconds:
            break
        row = {"class": item["class"], "tenant_rows": item["tenant_rows"]}
        vector, app = _app_dense_stage(item, backend, row)
        app_sorted = sorted(((i, 1 - s) for i, s in app.items()), key=lambda x: x[1])
        exact = _exact_scan(item, vector, backend, row)
        floor = backend.similarity_floor
        exact_floor = [(i, d) for i, d in exact if 1 - d >= floor]
        row["recall_app"] = recall_at_k(app_sorted, exact_floor)
        row["exact_returned"] = len(exact)
        for name, ef, mode in HNSW_VARIANTS:
            found = _hnsw_variant(item, vector, backend, row, name, ef=ef, mode=mode)
            found = sorted(found, key=lambda x: x[1])  # relaxed order: re-sort as the app's dict does
            row[f"{name}|recall"] = recall_at_k(found, exact)
            row[f"{name}|returned"] = len(found)
        rows.append(row)
    return {"rows": rows, "summary": summarise_recall(rows)}


def _app_dense_stage(item: dict, backend, row: dict):
    """The app's dense stage on the item's scope, as a request runs it; the scope's counts, the
    stage's time and path into ``row``. Returns the query vector and the stage's {id: similarity}."""
    from django.db import connection, transaction

    from memory_service.memories.models import Memory
    from memory_service.retrieval import candidates as C
    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_principal

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
    return vector, app


def _scope_knn(item: dict, vector, backend, *, hnsw: tuple[int, str] | None = None):
    """The app's k-NN queryset over the item's scope, unordered, as the app role inside the caller's
    tenant transaction; with ``hnsw`` (ef_search, iterative scan), that variant's settings first."""
    from django.db import connection

    from memory_service.memories.models import Memory
    from memory_service.retrieval import search as S
    from tenants.authentication import authenticate_principal

    token_obj = authenticate_principal(item["token"])
    if hnsw is not None:
        with connection.cursor() as cur:
            hnsw_settings(cur, ef_search=hnsw[0], iterative=hnsw[1])
    return dense_qs(
        Memory.objects.for_tenant(token_obj.tenant).filter(
            S.scope_filter(principal=token_obj, user=item["user"], repository=item["repository"], session="")
        ),
        token_obj,
        vector,
        backend,
    )


def _exact_scan(item: dict, vector, backend, row: dict) -> list[tuple]:
    """An exact scan of the item's scope as the app role: (id, distance) nearest first; its time in ``row``."""
    from django.db.models import F

    from memory_service.retrieval import candidates as C

    with tenant_tx(item["tenant_id"]):
        qs = _scope_knn(item, vector, backend)
        t = time.perf_counter()
        exact = list(qs.order_by(F("distance") + 0).values_list("memory_id", "distance")[: C.CANDIDATES])
        row["exact_ms"] = (time.perf_counter() - t) * 1000
    return exact


def _hnsw_variant(item: dict, vector, backend, row: dict, name: str, *, ef: int, mode: str) -> list[tuple]:
    """The item's k-NN under one HNSW variant's settings: (id, distance) as returned; its time in ``row``."""
    from memory_service.retrieval import candidates as C

    with tenant_tx(item["tenant_id"]):
        qs = _scope_knn(item, vector, backend, hnsw=(ef, mode))
        t = time.perf_counter()
        found = list(qs.order_by("distance").values_list("memory_id", "distance")[: C.CANDIDATES])
        row[f"{name}|ms"] = (time.perf_counter() - t) * 1000
    return found


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
