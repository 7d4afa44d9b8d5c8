"""The captured search statements run again: timings, plans, and the vector table stored in the heap.

Statements run as the application role with the tenant set and the same ``SET LOCAL`` settings as
the search that sent them.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict

from bench._stats import summary
from bench.perf.inprocess import tenant_tx


def hnsw_settings(cursor, *, ef_search: int = 200, iterative: str = "relaxed_order") -> None:
    """The planner settings of ``candidates.HNSW_SETTINGS`` (the index forced), or a variant's."""
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
        indexes = sorted(set(plan_indexes(plan[0]["Plan"])))
        out[key]["plan:" + (",".join(indexes) or "no index")].append(exec_ms)
        slow = plans.get(key)
        if slow is None or exec_ms > slow["exec_ms"]:
            plans[key] = {"exec_ms": exec_ms, "size_class": cap["size_class"], "text": explain_text(cap)}
    result = {}
    for key, series in out.items():
        result[key] = {name: summary(values) for name, values in series.items()}
    return {"timings": result, "slowest_plans": plans}


def plan_indexes(node: dict):
    if "Index Name" in node:
        yield node["Index Name"]
    for child in node.get("Plans", []):
        yield from plan_indexes(child)


def explain_text(cap: dict) -> str:
    from django.db import connection

    with tenant_tx(cap["tenant_id"]), connection.cursor() as cur:
        if cap["hnsw"] and cap["class"] == "vector k-NN":
            hnsw_settings(cur)
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + cap["sql"], cap["params"])
        return "\n".join(row[0] for row in cur.fetchall())


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
            self.indexes.append(sorted(set(plan_indexes(raw.fetchone()[0][0]["Plan"]))))
        return result


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
