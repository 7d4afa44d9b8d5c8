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

CANDIDATES = 50
RECENT_COUNT = 3
RECENT_KINDS = (Kind.LESSON, Kind.CONCLUSION)
# Up to this many candidate rows an exact scan is both exact and faster than filtered HNSW.
EXACT_SCAN_MAX_ROWS = 10_000
# The table's size only moves the HNSW threshold once it passes 1M rows: re-read it now and then.
_TABLE_ROWS_TTL_S = 300.0
_table_rows: dict[str, tuple[float, float]] = {}

# What ranking reads of a candidate; the script test has the ranges of ``search._script``.
_FACT_COLUMNS = (
    "m.id, m.priority, m.scope, m.confidence, m.created_at, m.occurred_at, "
    "m.text ~ '[\\u3040-\\u9fff\\uf900-\\ufaff\\uff66-\\uff9f]'"
)
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
    script: str  # "cjk" or "latin", as ``search._script`` would say of its text


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


def _statement(*, where: str, dimension: int | None, lexical: bool, recent: bool) -> str:
    """The candidate statement; a stage left out returns no rows (see ``find_candidates`` for the
    order of its parameters)."""
    dense = (
        f"""SELECT e.memory_id AS id, ((e.embedding)::vector({dimension}) <=> %s::vector) + 0.0 AS distance
            FROM memories_memoryembedding e
            WHERE e.tenant_id = %s AND e.model = %s AND e.memory_id IN (SELECT id FROM scoped)
              AND (SELECT n FROM scope_rows) <= %s
            ORDER BY distance LIMIT %s"""
        if dimension
        else "SELECT NULL::uuid AS id, NULL::float8 AS distance WHERE false"
    )
    lexical_sql = (
        f"""SELECT memories_memory.id, ts_rank(memories_memory.search_vector, to_tsquery('simple', %s), 1) AS rank
            FROM memories_memory
            WHERE ({where}) AND memories_memory.search_vector @@ to_tsquery('simple', %s)
            ORDER BY rank DESC LIMIT %s"""
        if lexical
        else "SELECT NULL::uuid AS id, NULL::real AS rank WHERE false"
    )
    recent_sql = (
        f"""SELECT memories_memory.id FROM memories_memory
            WHERE ({where}) AND memories_memory.kind = ANY(%s)
              AND (memories_memory.valid_until IS NULL OR memories_memory.valid_until > now())
            ORDER BY memories_memory.occurred_at DESC, memories_memory.created_at DESC LIMIT %s"""
        if recent
        else "SELECT NULL::uuid AS id WHERE false"
    )
    return f"""
        WITH scoped AS MATERIALIZED (SELECT memories_memory.id FROM memories_memory WHERE {where} LIMIT %s),
        scope_rows AS (SELECT count(*) AS n FROM scoped),
        dense AS MATERIALIZED ({dense}),
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


def find_candidates(
    *, scoped: QuerySet, token, vector, backend: EmbeddingBackend | None, tsquery: str, recent_kinds=RECENT_KINDS
) -> Candidates:
    """Dense, lexical and recent candidates of ``scoped`` with their memory rows.

    ``vector`` None means the query could not be embedded (no dense stage). ``tsquery`` is a
    ``to_tsquery('simple', …)`` string ('' for none). ``recent_kinds`` empty skips the recent stage.
    """
    where, where_params = _where(scoped)
    threshold = hnsw_threshold() if vector is not None else EXACT_SCAN_MAX_ROWS
    cap = threshold + 1
    sql = _statement(
        where=where,
        dimension=backend.dimension if vector is not None else None,
        lexical=bool(tsquery),
        recent=bool(recent_kinds),
    )
    params: list = [*where_params, cap]
    if vector is not None:
        params += [Vector._to_db(vector), token.tenant_id, backend.model_id, EXACT_SCAN_MAX_ROWS, CANDIDATES]
    if tsquery:
        params += [tsquery, *where_params, tsquery, CANDIDATES]
    if recent_kinds:
        params += [*where_params, [str(k) for k in recent_kinds], RECENT_COUNT]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()

    found = Candidates(path="exact" if vector is not None else "none")
    scope_rows = rows[0][0]  # there is always a row, with the memory columns null when none matched
    occurred = {}
    for _n, distance, rank, is_recent, memory_id, priority, scope, confidence, created, occurred_at, cjk in rows:
        if memory_id is None:
            continue
        found.facts[memory_id] = Candidate(
            id=memory_id,
            priority=priority,
            scope=scope,
            confidence=confidence,
            created_at=created,
            script="cjk" if cjk else "latin",
        )
        if distance is not None:
            similarity = 1.0 - float(distance)
            if similarity >= backend.similarity_floor:
                found.dense[memory_id] = similarity
        if rank is not None:
            found.lexical[memory_id] = float(rank)
        if is_recent:
            found.recent.append(memory_id)
            occurred[memory_id] = (occurred_at, created)
    found.recent.sort(key=occurred.get, reverse=True)

    if vector is not None and scope_rows > EXACT_SCAN_MAX_ROWS:
        if scope_rows > threshold:
            found.path = "hnsw"
            found.dense = _hnsw_candidates(scoped=scoped, token=token, vector=vector, backend=backend)
        else:  # between the limits: the exact scan is still the better plan, run on its own
            found.dense = _dense_exact(scoped=scoped, token=token, vector=vector, backend=backend)
        missing = list(set(found.dense) - set(found.facts))
        if missing:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {_FACT_COLUMNS} FROM memories_memory m WHERE m.id = ANY(%s)", [missing])
                for memory_id, priority, scope, confidence, created, _occurred, cjk in cursor.fetchall():
                    found.facts[memory_id] = Candidate(
                        id=memory_id,
                        priority=priority,
                        scope=scope,
                        confidence=confidence,
                        created_at=created,
                        script="cjk" if cjk else "latin",
                    )
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
