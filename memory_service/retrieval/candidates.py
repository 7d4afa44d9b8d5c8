"""The candidates of one search, found in one SQL statement for the usual (small) scope.

The statement reads the scope once (capped), runs the exact k-NN scan, the full-text match and
the newest lessons and conclusions, and returns the memory rows of all three with their scores.
One round trip instead of five, and one compilation of the scope's filter instead of five: the
fixed cost of a search was mostly ORM compilation and round trips (bench/RESULTS.md, "Search
performance").

A scope larger than the exact-scan limit is answered by the HNSW index with iterative scan in a
second statement (``_hnsw_candidates``): the planner must be steered for it, and the exact scan
would read every row of a large scope.
"""

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection, connections
from django.db.models import QuerySet
from django.db.models.functions import Cast
from pgvector import Vector
from pgvector.django import CosineDistance, VectorField

from memory_service.embeddings.backends import EmbeddingBackend
from memory_service.memories.models import Kind, Memory, MemoryEmbedding
from memory_service.retrieval.lexical import CJK_SCRIPT_CLASS

CANDIDATES = 50
RECENT_COUNT = 3
RECENT_KINDS = (Kind.LESSON, Kind.CONCLUSION)
# Up to this many candidate rows an exact scan is both exact and faster than filtered HNSW.
EXACT_SCAN_MAX_ROWS = 10_000
# The table's size only moves the HNSW threshold once it passes 1M rows: re-read it now and then.
_TABLE_ROWS_TTL_S = 300.0
_table_rows: dict[str, tuple[float, float]] = {}

# What ranking reads of a candidate; the last column is ``lexical.script_of(text) == "cjk"``.
_FACT_COLUMNS = f"m.id, m.priority, m.scope, m.confidence, m.created_at, m.occurred_at, m.text ~ '{CJK_SCRIPT_CLASS}'"
# Every column of a memory except its tsvector (large, and only ever used inside SQL).
_MEMORY_FIELDS = [f for f in Memory._meta.concrete_fields if f.attname != "search_vector"]
_MEMORY_COLUMNS = ", ".join(f'm."{f.column}"' for f in _MEMORY_FIELDS)
_MEMORY_ATTNAMES = [f.attname for f in _MEMORY_FIELDS]


@cache
def _converters(alias: str) -> list[tuple[int, list, object]]:
    """(column index, converters, column) for the memory columns whose values the ORM converts."""
    conn = connections[alias]
    found = []
    for index, field_ in enumerate(_MEMORY_FIELDS):
        col = field_.get_col(Memory._meta.db_table)
        converters = conn.ops.get_db_converters(col) + field_.get_db_converters(conn)
        if converters:
            found.append((index, converters, col))
    return found


def _memory_from_row(values: list, *, alias: str) -> Memory:
    """A Memory from its columns in ``_MEMORY_FIELDS`` order, with the ORM's value converters
    applied (JSON is decoded by the field, not by the driver)."""
    values = list(values)
    conn = connections[alias]
    for index, converters, col in _converters(alias):
        for converter in converters:
            values[index] = converter(values[index], col, conn)
    return Memory.from_db(alias, _MEMORY_ATTNAMES, values)


@dataclass(frozen=True)
class Candidate:
    """What ranking needs to know of a candidate, without its text (read later, for the few kept)."""

    id: uuid.UUID
    priority: str
    scope: str
    confidence: str
    created_at: datetime
    script: str  # "cjk" or "latin", as ``lexical.script_of`` says of its text


@dataclass
class Candidates:
    """What the candidate stage found; ``facts`` holds every candidate named by the other fields."""

    facts: dict[uuid.UUID, Candidate] = field(default_factory=dict)
    dense: dict[uuid.UUID, float] = field(default_factory=dict)  # cosine similarity, floor applied
    lexical: dict[uuid.UUID, float] = field(default_factory=dict)  # ts_rank
    recent: list[uuid.UUID] = field(default_factory=list)  # newest lessons and conclusions, newest first
    path: str = "exact"  # "exact", "hnsw" or "none" (no query vector)


def _where(queryset: QuerySet) -> tuple[str, list]:
    """The WHERE clause of ``queryset`` as SQL over the unaliased ``memories_memory`` table."""
    used = {alias for alias, count in queryset.query.alias_refcount.items() if count}
    if used - {Memory._meta.db_table}:
        raise ValueError("the scope's filter may only name columns of the memory table")
    compiler = queryset.query.get_compiler(using=queryset.db)
    try:
        sql, params = compiler.compile(queryset.query.where)
    except EmptyResultSet:
        return "false", []
    except FullResultSet:
        return "true", []
    return sql, list(params)


def hnsw_threshold() -> int:
    """Scope size above which filtered HNSW keeps recall: 10k rows, or 1 % of the vector table
    (below that share the shared index loses recall; bench/RESULTS.md, "Alternatives")."""
    now = time.monotonic()
    cached = _table_rows.get(connection.alias)
    if cached is None or now - cached[0] > _TABLE_ROWS_TTL_S:
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'memories_memoryembedding'")
            row = cursor.fetchone()
        cached = (now, float(row[0]) if row else 0.0)
        _table_rows[connection.alias] = cached
    return max(EXACT_SCAN_MAX_ROWS, int(cached[1] * 0.01))


def _statement(
    *, where: str, where_params: list, cap: int, dense: tuple | None, tsquery: str, recent_kinds: list[str]
) -> tuple[str, list]:
    """The candidate statement and its parameters.

    ``scoped`` reads the scope once (at most ``cap`` rows) with what the other stages need of each
    row, the full-text rank included. When the scope is complete (fewer than ``cap`` rows) the
    dense, lexical and recent stages read ``scoped`` only; when it is not, the dense stage returns
    nothing (``find_candidates`` runs HNSW next) and lexical and recent read the whole scope
    through the indexes instead. A stage that is not asked for returns no rows.
    """
    params: list = []
    if tsquery:
        rank = (
            "CASE WHEN memories_memory.search_vector @@ to_tsquery('simple', %s)"
            " THEN ts_rank(memories_memory.search_vector, to_tsquery('simple', %s), 1) END"
        )
        params += [tsquery, tsquery]
    else:
        rank = "NULL::real"
    params += [*where_params, cap]
    complete = f"(SELECT n FROM scope_rows) < {int(cap)}"

    if dense is not None:
        vector, tenant_id, model = dense
        # The exact scan: no cast to the index's dimension, and "+ 0.0" keeps the planner off the index.
        dense_sql = f"""SELECT e.memory_id AS id, (e.embedding <=> %s::vector) + 0.0 AS distance
            FROM memories_memoryembedding e
            WHERE {complete} AND e.tenant_id = %s AND e.model = %s AND e.memory_id IN (SELECT id FROM scoped)
            ORDER BY distance LIMIT %s"""
        params += [vector, tenant_id, model, CANDIDATES]
    else:
        dense_sql = "SELECT NULL::uuid AS id, NULL::float8 AS distance WHERE false"

    if tsquery:
        lexical_sql = f"""(SELECT id, rank FROM scoped WHERE {complete} AND rank IS NOT NULL
             ORDER BY rank DESC, id LIMIT %s)
            UNION ALL
            (SELECT memories_memory.id, ts_rank(memories_memory.search_vector, to_tsquery('simple', %s), 1) AS rank
             FROM memories_memory
             WHERE NOT {complete} AND ({where}) AND memories_memory.search_vector @@ to_tsquery('simple', %s)
             ORDER BY rank DESC, id LIMIT %s)"""
        params += [CANDIDATES, tsquery, *where_params, tsquery, CANDIDATES]
    else:
        lexical_sql = "SELECT NULL::uuid AS id, NULL::real AS rank WHERE false"

    if recent_kinds:
        live = "(valid_until IS NULL OR valid_until > now())"
        recent_sql = f"""(SELECT id FROM scoped WHERE {complete} AND kind = ANY(%s) AND {live}
             ORDER BY occurred_at DESC, created_at DESC LIMIT %s)
            UNION ALL
            (SELECT memories_memory.id FROM memories_memory
             WHERE NOT {complete} AND ({where}) AND memories_memory.kind = ANY(%s) AND {live}
             ORDER BY memories_memory.occurred_at DESC, memories_memory.created_at DESC LIMIT %s)"""
        params += [recent_kinds, RECENT_COUNT, *where_params, recent_kinds, RECENT_COUNT]
    else:
        recent_sql = "SELECT NULL::uuid AS id WHERE false"

    sql = f"""
        WITH scoped AS MATERIALIZED (
            SELECT memories_memory.id, memories_memory.kind, memories_memory.valid_until,
                   memories_memory.occurred_at, memories_memory.created_at, {rank} AS rank
            FROM memories_memory WHERE {where} LIMIT %s),
        scope_rows AS (SELECT count(*) AS n FROM scoped),
        dense AS MATERIALIZED ({dense_sql}),
        lexical AS MATERIALIZED ({lexical_sql}),
        recent AS MATERIALIZED ({recent_sql}),
        found AS (SELECT id FROM dense UNION SELECT id FROM lexical UNION SELECT id FROM recent)
        SELECT (SELECT n FROM scope_rows), d.distance, l.rank, r.id IS NOT NULL, {_FACT_COLUMNS}
        FROM (SELECT 1) one
        LEFT JOIN (found JOIN memories_memory m ON m.id = found.id) ON true
        LEFT JOIN dense d ON d.id = m.id
        LEFT JOIN lexical l ON l.id = m.id
        LEFT JOIN recent r ON r.id = m.id
    """
    return sql, params


def _scope_exceeds(where: str, where_params: list, limit: int) -> bool:
    """Whether the scope holds more than ``limit`` rows (counted no further than that)."""
    if limit <= EXACT_SCAN_MAX_ROWS:
        return True  # the caller found more than the exact-scan limit already
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories_memory WHERE {where} LIMIT %s) capped",
            [*where_params, limit + 1],
        )
        return cursor.fetchone()[0] > limit


def _candidate(row) -> Candidate:
    memory_id, priority, scope, confidence, created, _occurred, cjk = row
    return Candidate(
        id=memory_id,
        priority=priority,
        scope=scope,
        confidence=confidence,
        created_at=created,
        script="cjk" if cjk else "latin",
    )


def find_candidates(
    *, scoped: QuerySet, token, vector, backend: EmbeddingBackend | None, tsquery: str, recent_kinds=RECENT_KINDS
) -> Candidates:
    """Dense, lexical and recent candidates of ``scoped`` with what ranking needs of each.

    ``vector`` None means the query could not be embedded (no dense stage). ``tsquery`` is a
    ``to_tsquery('simple', …)`` string ('' for none). ``recent_kinds`` empty skips the recent stage.
    """
    where, where_params = _where(scoped)
    dense = None if vector is None else (Vector._to_db(vector), token.tenant_id, backend.model_id)
    sql, params = _statement(
        where=where,
        where_params=where_params,
        cap=EXACT_SCAN_MAX_ROWS + 1,
        dense=dense,
        tsquery=tsquery,
        recent_kinds=[str(k) for k in recent_kinds],
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()

    found = Candidates(path="exact" if vector is not None else "none")
    complete = rows[0][0] <= EXACT_SCAN_MAX_ROWS  # there is always a row; its memory columns are null when none matched
    occurred = {}
    for _n, distance, rank, is_recent, *facts in rows:
        memory_id = facts[0]
        if memory_id is None:
            continue
        found.facts[memory_id] = _candidate(facts)
        if distance is not None:
            similarity = 1.0 - float(distance)
            if similarity >= backend.similarity_floor:
                found.dense[memory_id] = similarity
        if rank is not None:
            found.lexical[memory_id] = float(rank)
        if is_recent:
            found.recent.append(memory_id)
            occurred[memory_id] = (facts[5], facts[4])
    found.recent.sort(key=occurred.get, reverse=True)

    if vector is not None and not complete:
        if _scope_exceeds(where, where_params, hnsw_threshold()):
            found.path = "hnsw"
            found.dense = _hnsw_candidates(scoped=scoped, token=token, vector=vector, backend=backend)
        else:  # between the limits: the exact scan is still the better plan, run on its own
            found.dense = _dense_exact(scoped=scoped, token=token, vector=vector, backend=backend)
        missing = list(set(found.dense) - set(found.facts))
        if missing:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {_FACT_COLUMNS} FROM memories_memory m WHERE m.id = ANY(%s)", [missing])
                for facts in cursor.fetchall():
                    found.facts[facts[0]] = _candidate(facts)
    return found


def memories_by_id(ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    """The memories with these ids (ids the candidate stage found in this transaction), in one
    statement and without the ORM's query compilation."""
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories_memory m WHERE m.id = ANY(%s)", [list(ids)])
        rows = cursor.fetchall()
    memories = (_memory_from_row(values, alias=connection.alias) for values in rows)
    return {memory.id: memory for memory in memories}


def _knn(*, scoped: QuerySet, token, vector, backend: EmbeddingBackend, exact: bool) -> dict:
    # Cast to the model's dimension: this is the expression its partial HNSW index is built on.
    distance = CosineDistance(Cast("embedding", output_field=VectorField(dimensions=backend.dimension)), vector)
    rows = MemoryEmbedding.objects.for_tenant(token.tenant).filter(model=backend.model_id, memory__in=scoped)
    # "+ 0.0" keeps the planner off the index: an exact scan, the distance computed once.
    ordered = rows.annotate(distance=distance + 0.0 if exact else distance).order_by("distance")
    found = {}
    for memory_id, dist in ordered.values_list("memory_id", "distance")[:CANDIDATES]:
        similarity = 1.0 - float(dist)
        if similarity >= backend.similarity_floor:
            found[memory_id] = similarity
    return found


def _dense_exact(*, scoped: QuerySet, token, vector, backend: EmbeddingBackend) -> dict:
    """memory id → similarity by an exact scan of the whole scope."""
    return _knn(scoped=scoped, token=token, vector=vector, backend=backend, exact=True)


def _hnsw_candidates(*, scoped: QuerySet, token, vector, backend: EmbeddingBackend) -> dict:
    """memory id → similarity from the HNSW index with iterative scan, forced (the planner would
    pick the exact plan and take 300+ ms on a large scope)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SET LOCAL hnsw.ef_search = 200")
        cursor.execute("SET LOCAL enable_sort = off")
    try:
        return _knn(scoped=scoped, token=token, vector=vector, backend=backend, exact=False)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_sort = on")  # survives savepoints: restore it
