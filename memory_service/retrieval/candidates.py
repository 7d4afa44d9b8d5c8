"""The candidates of one search, found in two SQL statements that read only what they keep.

``text_candidates`` (lexical and recent stages) needs no query vector, and ``dense_statement``
needs nothing the text stages find: a search sends the text statement on its connection while a
helper thread embeds the query and sends the dense statement on a side connection
(``retrieval.side``); ``add_dense_candidates`` takes those rows, or runs the statement itself.

At a million memories a search's cost is locality: a scope's rows lie on as many heap pages as it
has rows (bench/perf/analysis.md). So each stage reads an index range of the scope owners instead
of the scope's rows:

- dense: ``ScopeVector`` holds each vector under its scope owner key, in a covering index. The
  exact k-NN of the scope is one index-only range scan per owner; the nearest rows are then
  checked against the scope's full filter (expiry, visibility, kinds). Their similarity is the
  half-precision one the scan computed (within 1e-3 of float32): rescoring them with the float
  vectors read 100 rows of ``MemoryEmbedding`` per search and changed no top 10 in 150 searches
  at 1M (bench/perf/analysis.md);
- lexical: the best full-text matches of the scope owners by Okapi BM25 (k1 0.9, b 0.4, migration 0015; term
  document counts and average length over the owners' memories, kept by triggers: migrations 0010,
  0016), from a GIN index with one key per (tenant, owner, lexeme), through
  ``memory_lexical_matches`` (migrations 0006, 0007, 0009: under row-level security the match could
  never use an index; 0016, 0018: in scopes past 50,000 memories, only the matches holding most of the
  query's rarest terms, chosen in the index), each checked against the scope's filter like the
  dense ones;
- recent: the newest lessons and conclusions of each owner, from ``memory_owner_kind_occurred``;
- a conversation's neighbours (after fusion, with ``Ranking.thread_fetch``, not the service's
  ranking: ``thread_neighbours``): the turns just before and after the ranked candidates, by
  primary key and ``memory_thread_previous``, checked against the filter.

A scope whose owners hold more than ``COVERING_MAX_ROWS`` vectors, a filter that rejects most of
the nearest rows, or a model too wide for the covering index (``SCOPE_VECTOR_MAX_DIMENSION``)
takes the dense stage from ``MemoryEmbedding``: an exact scan of the scope when it is small
enough, else the HNSW index with iterative scan (``hnsw_statement``). Whether it is small enough
(``_exceeds_sql``: a lower bound from indexes, else a capped count) is asked by the dense statement
itself when the owners are past ``COVERING_MAX_ROWS`` (on the side connection, while the text
statement runs), else afterwards (``_scope_exceeds``). A filter that rejects most of the best
full-text matches takes the lexical stage from all of the owners' matches (``_lexical_scan``).
"""

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection
from django.db.models import QuerySet
from django.db.models.functions import Cast
from pgvector import HalfVector, Vector
from pgvector.django import CosineDistance, VectorField

from memory_service import rows
from memory_service.embeddings.backends import EmbeddingBackend
from memory_service.memories.models import SCOPE_VECTOR_MAX_DIMENSION, Kind, Memory, MemoryEmbedding
from memory_service.memories.selectors import SUPERSESSION_LINKS_LATERAL
from memory_service.retrieval.lexical import CJK_SCRIPT_CLASS, identifiers_named_in
from memory_service.retrieval.times import states_a_time

CANDIDATES = 50
RECENT_COUNT = 3
RECENT_KINDS = (Kind.LESSON, Kind.CONCLUSION)
# Up to this many candidate rows an exact scan of MemoryEmbedding is both exact and faster than
# filtered HNSW.
EXACT_SCAN_MAX_ROWS = 10_000
# Up to this many vectors of the scope's owners the covering index is read whole (exact k-NN);
# past it, HNSW. The nearest NEAREST_READ of them are checked against the scope's filter.
COVERING_MAX_ROWS = 50_000
NEAREST_READ = 2 * CANDIDATES
# The table's size only moves the HNSW threshold once it passes 1M rows: re-read it now and then.
_TABLE_ROWS_TTL_S = 300.0
_table_rows: dict[str, tuple[float, float]] = {}

# What ranking reads of a candidate; the seventh column is ``lexical.script_of(text) == "cjk"``. The
# times are epoch seconds (float8 keeps their microseconds): ~150 rows a search, and loading them
# as datetimes cost ~1 ms of Python per statement (bench/perf/analysis.md).
_FACT_COLUMNS = (
    "m.id, m.priority, m.scope, m.confidence, extract(epoch FROM m.created_at)::float8,"
    f" extract(epoch FROM m.occurred_at)::float8, m.text ~ '{CJK_SCRIPT_CLASS}', m.thread_previous_id"
)
# Every column of a memory except its tsvector (large, and only ever used inside SQL).
_MEMORY_FIELDS = rows.concrete_fields(Memory, exclude=("search_vector",))
_MEMORY_COLUMNS = rows.columns(_MEMORY_FIELDS, table_alias="m")


@dataclass(frozen=True)
class Candidate:
    """What ranking needs to know of a candidate, without its text (read later, for the few kept)."""

    id: uuid.UUID
    priority: str
    scope: str
    confidence: str
    created: float  # created_at, in epoch seconds
    script: str  # "cjk" or "latin", as ``lexical.script_of`` says of its text
    follows: uuid.UUID | None = None  # the turn before it in its conversation (``Memory.thread_previous``)


@dataclass
class Candidates:
    """What the candidate stage found; ``facts`` holds every candidate named by the other fields."""

    facts: dict[uuid.UUID, Candidate] = field(default_factory=dict)
    dense: dict[uuid.UUID, float] = field(default_factory=dict)  # cosine similarity, floor applied
    lexical: dict[uuid.UUID, float] = field(default_factory=dict)  # BM25 score
    # The BM25 score of an average-length memory holding each query term found once (the sum of
    # their IDFs): the same for every candidate of a search, 0 with no lexical candidate.
    lexical_ideal: float = 0.0
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


@dataclass(frozen=True)
class SearchScope:
    """The memories a search may return: the queryset, its WHERE clause as SQL (compiled once), and
    the ``models.owner_key`` of every scope owner it may hold (a superset is fine: every candidate
    is checked against the filter).

    ``whole_owner_keys``: owners (a subset of ``owner_keys``, possibly empty) every unexpired memory
    of whom of ``kinds`` (every kind when empty) the scope holds — no other part of the filter
    rejects any. Only used to tell cheaply that a scope is large (``_exceeds_sql``)."""

    queryset: QuerySet
    where: str
    where_params: list
    owner_keys: list[str]
    whole_owner_keys: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


def search_scope(
    *, scoped: QuerySet, owner_keys: Sequence[str], whole_owner_keys: Sequence[str] = (), kinds: Sequence[str] = ()
) -> SearchScope:
    """The ``SearchScope`` of ``scoped``; its filter may only name columns of the memory table."""
    where, where_params = _where(scoped)
    return SearchScope(
        queryset=scoped,
        where=where,
        where_params=where_params,
        owner_keys=list(owner_keys),
        whole_owner_keys=list(whole_owner_keys),
        kinds=[str(kind) for kind in kinds],
    )


def _text_statement(*, scope: SearchScope, tsquery: str, recent_kinds: list[str]) -> tuple[str, list]:
    """The lexical and recent stages in one statement. A stage not asked for returns no rows.

    Its rows: the number of full-text matches read, then one row per candidate (its BM25 score
    and the query's ideal score, or nulls; whether it is recent; ``_FACT_COLUMNS``), or one row of
    nulls.
    """
    where, where_params, owner_keys = scope.where, scope.where_params, scope.owner_keys
    params: list = []
    if tsquery:
        # The best matches of the owners (memory_lexical_matches: the owner-lexeme GIN index,
        # current tenant only), each then checked against the scope's filter by its primary key
        # (OFFSET 0 keeps the planner from reading the whole scope for a hash join instead).
        matched_sql = "SELECT id, rank, ideal FROM memory_lexical_matches(%s::text[], to_tsquery('simple', %s), %s)"
        lexical_sql = f"""SELECT matched.id, matched.rank, matched.ideal
            FROM matched
            CROSS JOIN LATERAL (SELECT 1 FROM memories_memory
                                WHERE memories_memory.id = matched.id AND ({where}) OFFSET 0) visible
            ORDER BY matched.rank DESC, matched.id LIMIT %s"""
        params += [owner_keys, tsquery, NEAREST_READ, *where_params, CANDIDATES]
    else:
        matched_sql = "SELECT NULL::uuid AS id, NULL::real AS rank, NULL::real AS ideal WHERE false"
        lexical_sql = "SELECT NULL::uuid AS id, NULL::real AS rank, NULL::real AS ideal WHERE false"

    if recent_kinds:
        # Per owner and kind, the newest rows from the index, until RECENT_COUNT pass the filter.
        recent_sql = f"""SELECT r.id, r.occurred_at, r.created_at
            FROM unnest(%s::text[]) AS k(owner_key) CROSS JOIN unnest(%s::text[]) AS c(kind)
            CROSS JOIN LATERAL (
                SELECT memories_memory.id, memories_memory.occurred_at, memories_memory.created_at
                FROM memories_memory
                WHERE memories_memory.owner_key = k.owner_key AND memories_memory.kind = c.kind
                  AND (memories_memory.valid_until IS NULL OR memories_memory.valid_until > now()) AND ({where})
                ORDER BY memories_memory.occurred_at DESC, memories_memory.created_at DESC LIMIT %s) r
            ORDER BY r.occurred_at DESC, r.created_at DESC LIMIT %s"""
        params += [owner_keys, recent_kinds, *where_params, RECENT_COUNT, RECENT_COUNT]
    else:
        recent_sql = "SELECT NULL::uuid AS id WHERE false"

    sql = f"""
        WITH matched AS MATERIALIZED ({matched_sql}),
        lexical AS MATERIALIZED ({lexical_sql}),
        recent AS MATERIALIZED ({recent_sql}),
        found AS (SELECT id FROM lexical UNION SELECT id FROM recent)
        SELECT (SELECT count(*) FROM matched), l.rank, l.ideal, r.id IS NOT NULL, {_FACT_COLUMNS}
        FROM (SELECT 1) one
        LEFT JOIN (found JOIN memories_memory m ON m.id = found.id) ON true
        LEFT JOIN lexical l ON l.id = m.id
        LEFT JOIN recent r ON r.id = m.id
    """
    return sql, params


def dense_statement(
    vector, *, scope: SearchScope, tenant_id, backend: EmbeddingBackend, hnsw_rows: int
) -> tuple[str, list]:
    """The dense stage of ``scope`` for ``vector`` over the covering index (``covering_path``) in
    one statement; its rows are what ``add_dense_candidates`` takes.

    Its rows: the number of the scope owners' vectors (counted up to ``COVERING_MAX_ROWS + 1``; or
    their number of memories when that is already past it), the number of nearest vectors read,
    whether the scope holds more than ``hnsw_rows`` memories (``hnsw_threshold()``; ``_exceeds_sql``;
    asked only when the owners hold more than ``COVERING_MAX_ROWS``, else null), then one row per
    candidate (its cosine distance, ``_FACT_COLUMNS``), or one row of nulls.
    """
    # The owners' memories are counted first, from their one row each in OwnerLexicalStats: past
    # COVERING_MAX_ROWS (a monorepo) nothing else is read and the search takes another path. Else
    # their vectors are counted from the narrow index (at most COVERING_MAX_ROWS + 1), and only
    # when there are no more than COVERING_MAX_ROWS is their range of the covering index read:
    # each distance computed once, the nearest kept by a bounded sort. Counting in the same pass
    # cost a materialised copy of the range (bench/perf/analysis.md).
    # Each of the nearest is then checked against the scope's filter by its primary key (OFFSET 0:
    # see _text_statement). Past COVERING_MAX_ROWS, whether the scope holds more than hnsw_rows
    # memories (_exceeds_sql) tells whether the HNSW index or an exact scan answers, here beside
    # the text statement rather than after it.
    owners = "v.tenant_id = %s AND v.model = %s AND v.owner_key = ANY(%s)"
    limit = int(COVERING_MAX_ROWS)
    exceeds_sql, exceeds_params = _exceeds_sql(scope, tenant_id=tenant_id, limit=hnsw_rows)
    sql = f"""
        WITH owner_memories AS MATERIALIZED (
            SELECT coalesce(sum(s.documents), 0) AS n FROM memories_ownerlexicalstats s
            WHERE s.tenant_id = %s AND s.owner_key = ANY(%s)),
        range_rows AS MATERIALIZED (
            SELECT CASE WHEN (SELECT n FROM owner_memories) > {limit} THEN (SELECT n FROM owner_memories)
                        ELSE (SELECT count(*) FROM (
                                  SELECT 1 FROM memories_scopevector v WHERE {owners} LIMIT {limit + 1}) capped)
                   END AS n),
        nearest AS MATERIALIZED (
            SELECT memory_id, distance FROM (
                SELECT v.memory_id, v.embedding <=> %s::halfvec AS distance
                FROM memories_scopevector v WHERE {owners} LIMIT {limit + 1}) ranged
            WHERE (SELECT n FROM range_rows) <= {limit}
            ORDER BY distance LIMIT {int(NEAREST_READ)}),
        scope_exceeds AS MATERIALIZED (
            SELECT CASE WHEN (SELECT n FROM range_rows) > {limit} THEN {exceeds_sql} END AS exceeds),
        dense AS MATERIALIZED (
            SELECT nearest.memory_id AS id, nearest.distance
            FROM nearest
            CROSS JOIN LATERAL (SELECT 1 FROM memories_memory
                                WHERE memories_memory.id = nearest.memory_id AND ({scope.where}) OFFSET 0) visible
            ORDER BY nearest.distance LIMIT %s)
        SELECT (SELECT n FROM range_rows), (SELECT count(*) FROM nearest), (SELECT exceeds FROM scope_exceeds),
               d.distance, {_FACT_COLUMNS}
        FROM (SELECT 1) one
        LEFT JOIN (dense d JOIN memories_memory m ON m.id = d.id) ON true
    """
    owner_params = [tenant_id, backend.model_id, scope.owner_keys]
    half_vector = HalfVector(vector).to_text()
    return sql, [
        tenant_id, scope.owner_keys, *owner_params, half_vector, *owner_params,
        *exceeds_params, *scope.where_params, CANDIDATES,
    ]  # fmt: skip


def _exceeds_sql(scope: SearchScope, *, tenant_id, limit: int) -> tuple[str, list]:
    """A boolean SQL expression: whether ``scope`` (of tenant ``tenant_id``) holds more than
    ``limit`` memories.

    First from indexes alone: the whole owners' memories of the scope's kinds (read from
    ``memory_owner_kind_occurred``, up to limit + 1 more than those expiring) less those of them
    that have an expiry (``memory_owner_expiring``; none of a user's or a repository's as written)
    is a lower bound of the scope's size (1.9 ms for a monorepo at 1M). Only when that bound is
    not past ``limit`` are the scope's rows counted, with its whole filter (up to limit + 1 rows
    from the heap: 13 ms).
    """
    cap = int(limit) + 1
    counted = f"""(SELECT count(*) FROM (SELECT 1 FROM memories_memory WHERE ({scope.where}) LIMIT {cap}) capped)
        > {int(limit)}"""
    if not scope.whole_owner_keys:
        return counted, list(scope.where_params)
    kinds = "AND o.kind = ANY(%s)" if scope.kinds else ""
    # Both counts are capped; an expiring count at its cap proves nothing (the bound is then 0).
    sql = f"""CASE WHEN (
            SELECT CASE WHEN e.n >= {cap} THEN 0
                        ELSE (SELECT count(*) FROM (
                                  SELECT 1 FROM memories_memory o
                                  WHERE o.tenant_id = %s AND o.owner_key = ANY(%s) {kinds}
                                  LIMIT {cap} + e.n) whole) - e.n
                   END
            FROM (SELECT count(*) AS n FROM (
                      SELECT 1 FROM memories_memory x
                      WHERE x.tenant_id = %s AND x.owner_key = ANY(%s) AND x.expires_at IS NOT NULL
                      LIMIT {cap}) expiring) e) > {int(limit)} THEN true
        ELSE {counted} END"""
    owners = [tenant_id, scope.whole_owner_keys]
    return sql, [*owners, *([scope.kinds] if scope.kinds else []), *owners, *scope.where_params]


def _scope_exceeds(*, scope: SearchScope, tenant_id, limit: int) -> bool:
    """Whether the scope holds more than ``limit`` memories (``_exceeds_sql``)."""
    sql, params = _exceeds_sql(scope, tenant_id=tenant_id, limit=limit)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql}", params)
        return cursor.fetchone()[0]


def _candidate(row) -> Candidate:
    memory_id, priority, scope, confidence, created, _occurred, cjk, follows = row
    return Candidate(
        id=memory_id,
        priority=priority,
        scope=scope,
        confidence=confidence,
        created=created,
        script="cjk" if cjk else "latin",
        follows=follows,
    )


def find_candidates(
    *,
    scoped: QuerySet,
    owner_keys: list[str],
    principal,
    vector,
    backend: EmbeddingBackend | None,
    tsquery: str,
    recent_kinds=RECENT_KINDS,
) -> Candidates:
    """Dense, lexical and recent candidates of ``scoped`` with what ranking needs of each.

    ``owner_keys``: see ``SearchScope``. ``vector`` None means the query could not be embedded
    (no dense stage). ``tsquery`` is a ``to_tsquery('simple', …)`` string ('' for none).
    ``recent_kinds`` empty skips the recent stage.
    """
    scope = search_scope(scoped=scoped, owner_keys=owner_keys)
    found = text_candidates(scope=scope, tsquery=tsquery, recent_kinds=recent_kinds)
    if vector is not None:
        add_dense_candidates(found, scope=scope, principal=principal, vector=vector, backend=backend)
    return found


def text_candidates(*, scope: SearchScope, tsquery: str, recent_kinds=RECENT_KINDS) -> Candidates:
    """The lexical and recent candidates of ``scope``: one statement that needs no query vector, so a
    search sends it while the query is being embedded. ``found.path`` is "none" until
    ``add_dense_candidates``."""
    found = Candidates(path="none")
    if not tsquery and not recent_kinds:
        return found
    sql, params = _text_statement(scope=scope, tsquery=tsquery, recent_kinds=[str(k) for k in recent_kinds])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        result = cursor.fetchall()
    matched_rows = result[0][0]  # there is always a row
    occurred = {}
    for _matched, rank, ideal, is_recent, *facts in result:
        memory_id = facts[0]
        if memory_id is None:
            continue
        found.facts[memory_id] = _candidate(facts)
        if rank is not None:
            found.lexical[memory_id] = float(rank)
            found.lexical_ideal = float(ideal)
        if is_recent:
            found.recent.append(memory_id)
            occurred[memory_id] = (facts[5], facts[4])
    found.recent.sort(key=occurred.get, reverse=True)

    if matched_rows >= NEAREST_READ and len(found.lexical) < CANDIDATES:  # the filter rejected most matches
        found.lexical, found.lexical_ideal = _lexical_scan(scope=scope, tsquery=tsquery)
        _add_facts(found, found.lexical)
    return found


def covering_path(backend: EmbeddingBackend) -> bool:
    """Whether the model's vectors are in the covering index (``dense_statement`` can answer)."""
    return backend.dimension <= SCOPE_VECTOR_MAX_DIMENSION


def add_dense_candidates(
    found: Candidates,
    *,
    scope: SearchScope,
    principal,
    vector,
    backend: EmbeddingBackend,
    rows: list | None = None,
    hnsw_rows: list | None = None,
) -> None:
    """Add to ``found`` the nearest neighbours of ``vector`` in ``scope`` (an exact search, with
    half-precision distances on the covering path), above the model's similarity floor, and set
    ``found.path``.

    ``rows``: the rows of ``dense_statement`` when another connection already ran it, and
    ``hnsw_rows`` those of ``hnsw_statement`` when it ran there too (``retrieval.side``); else
    they run here.
    """
    found.path = "exact"
    covering = covering_path(backend)
    range_rows = nearest_rows = dense_rows = 0
    scope_exceeds = None
    if covering:
        if rows is None:
            sql, params = dense_statement(
                vector, scope=scope, tenant_id=principal.tenant_id, backend=backend, hnsw_rows=hnsw_threshold()
            )
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
        range_rows, nearest_rows, scope_exceeds = rows[0][:3]  # there is always a row
        for _n, _nearest, _exceeds, distance, *facts in rows:
            memory_id = facts[0]
            if memory_id is None:
                continue
            dense_rows += 1
            similarity = 1.0 - float(distance)
            if similarity >= backend.similarity_floor:
                found.dense[memory_id] = similarity
                found.facts.setdefault(memory_id, _candidate(facts))

    # The covering index could not answer: too many vectors, too few of the nearest in the scope.
    incomplete = range_rows > COVERING_MAX_ROWS or (nearest_rows >= NEAREST_READ and dense_rows < CANDIDATES)
    if not covering or incomplete:
        if scope_exceeds is None:  # the dense statement did not count the scope
            scope_exceeds = _scope_exceeds(scope=scope, tenant_id=principal.tenant_id, limit=hnsw_threshold())
        if scope_exceeds:
            found.path = "hnsw"
            if hnsw_rows is None:
                hnsw_rows = _hnsw_rows(scope=scope, tenant_id=principal.tenant_id, vector=vector, backend=backend)
            found.dense = _similarities(hnsw_rows, backend)
        else:
            found.dense = _dense_exact(scoped=scope.queryset, principal=principal, vector=vector, backend=backend)
        _add_facts(found, found.dense)


def _add_facts(found: Candidates, ids) -> None:
    """Read what ranking needs of those of ``ids`` that ``found`` has no facts for yet."""
    missing = list(set(ids) - set(found.facts))
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {_FACT_COLUMNS} FROM memories_memory m WHERE m.id = ANY(%s)", [missing])
            for facts in cursor.fetchall():
                found.facts[facts[0]] = _candidate(facts)


def thread_neighbours(*, scope: SearchScope, ranked: Mapping[uuid.UUID, Candidate]) -> dict[uuid.UUID, Candidate]:
    """memory id → ``Candidate`` of the turns just before and after the ``ranked`` candidates in
    their conversations (``Memory.thread_previous``) that are not ranked themselves, as far as they
    pass the scope's filter. One statement over the primary key and the ``memory_thread_previous``
    index; none when nothing is ranked."""
    if not ranked:
        return {}
    ids = list(ranked)
    befores = list({fact.follows for fact in ranked.values() if fact.follows is not None} - set(ranked))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT {_FACT_COLUMNS} FROM memories_memory m
                CROSS JOIN LATERAL (SELECT 1 FROM memories_memory
                                    WHERE memories_memory.id = m.id AND ({scope.where}) OFFSET 0) visible
                WHERE (m.id = ANY(%s) OR m.thread_previous_id = ANY(%s)) AND NOT m.id = ANY(%s)""",
            [*scope.where_params, befores, ids, ids],
        )
        return {row[0]: _candidate(row) for row in cursor.fetchall()}


def _lexical_scan(*, scope: SearchScope, tsquery: str) -> tuple[dict, float]:
    """memory id → BM25 score of the best full-text matches that pass the scope's filter, among all
    of the owners' matches, when the filter rejects most of the best ones (a ``kinds`` filter, say);
    and the query's ideal score."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT matched.id, matched.rank, matched.ideal
                FROM memory_lexical_matches(%s::text[], to_tsquery('simple', %s), NULL) matched
                CROSS JOIN LATERAL (SELECT 1 FROM memories_memory
                                    WHERE memories_memory.id = matched.id AND ({scope.where}) OFFSET 0) visible
                ORDER BY matched.rank DESC, matched.id LIMIT %s""",
            [scope.owner_keys, tsquery, *scope.where_params, CANDIDATES],
        )
        rows = cursor.fetchall()
    return {memory_id: float(rank) for memory_id, rank, _ideal in rows}, float(rows[0][2]) if rows else 0.0


def rescore_similarities(vector, *, ids: list[uuid.UUID], backend: EmbeddingBackend) -> dict[uuid.UUID, float]:
    """memory id → cosine similarity of ``vector`` to the stored vector of ``backend`` (the
    re-scoring model), for those of ``ids`` (candidates of this search) that have one. One
    statement over the primary key; the vectors stay in the database."""
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT e.memory_id, 1 - (e.embedding::vector({int(backend.dimension)}) <=> %s::vector)
                FROM memories_memoryembedding e WHERE e.memory_id = ANY(%s) AND e.model = %s""",
            [Vector(vector).to_text(), list(set(ids)), backend.model_id],
        )
        return {memory_id: float(similarity) for memory_id, similarity in cursor.fetchall()}


# How a transcript writes a turn's speaker at the start of a line, around the masked name: a list
# marker ("-", "1.") or a quote's, a time or date ("[10:32]", "2025-02-08 14:05", "【10:32】"),
# emphasis ("**…**"), a parenthesis after the name ("(10:32)"), then a colon, ASCII or full-width.
# Regular expressions PostgreSQL and Python read alike (``speaker_pattern`` adds "(?n)^": every line).
_LINE_START = r"[ \t]*(?:(?:[-*>\u2022]|\d{1,3}[.)])[ \t]*)?"
_STAMP = (
    r"(?:[\[\u3010][^]\u3011\n]{1,40}[]\u3011][ \t]*"
    r"|(?:\d{1,4}(?:[-:/.]\d{1,4})+(?:[ \t]*[AaPp]\.?[Mm]\.?)?[ \t,]+){1,2})?"
)
_EMPHASIS = r"(?:\*\*|__|\*|_)?"
_AFTER_NAME = rf"(?:[ \t]*\([^)\n]{{0,40}}\))?[ \t]*{_EMPHASIS}[ \t]*[:\uff1a]"


def speaker_pattern(people: list[str]) -> str:
    """A PostgreSQL regular expression matching a line spoken by one of ``people`` (the twelve hex
    digits of each person's pseudonym, as ``pii.person_pseudonyms`` gives them)."""
    if not all(len(p) == 12 and set(p) <= set("0123456789abcdef") for p in people):
        raise ValueError("people must be pseudonyms' hex digits")
    names = "|".join(people)
    return rf"(?n)^{speaker_line(f'<PERSON_(?:{names})>')}"


def speaker_line(speaker: str) -> str:
    """A regular expression (PostgreSQL's and Python's alike) for the opening of a line spoken by
    ``speaker`` (a regular expression itself): an optional list or quote marker, a time or a date,
    emphasis, the name, an optional parenthesis, and a colon."""
    return rf"{_LINE_START}{_STAMP}{_EMPHASIS}{speaker}{_AFTER_NAME}"


def spoken_by(ids, *, people: list[str]) -> set[uuid.UUID]:
    """Those of ``ids`` (candidates of this search) with a line spoken by one of ``people``: a line
    of the text that starts with the person's masked name and a colon, as a conversation's turn is
    written ("<PERSON_1a2b3c4d5e6f>: I sanded the hull"), also in the forms transcripts give it
    (``speaker_pattern``: "[10:32] <PERSON_…>:", "**<PERSON_…>**:", "- <PERSON_…> (10:32):"). A
    name anywhere else in a line is a mention, not a speaker. ``people``: masked names, as
    ``pii.person_pseudonyms`` gives them. One statement over the primary key."""
    if not ids or not people:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.id FROM memories_memory m WHERE m.id = ANY(%s) AND m.text ~ %s",
            [list(ids), speaker_pattern(people)],
        )
        return {memory_id for (memory_id,) in cursor.fetchall()}


# How much of a candidate's title and text ``stating_a_time`` reads: a 16 KB note takes ~1 ms to
# read word by word, a turn of a conversation ~0.01 ms; a note that says when mostly says it early.
TIME_READ_CHARS = 1000


def stating_a_time(ids) -> set[uuid.UUID]:
    """Those of ``ids`` (candidates of this search) whose title or text states a time
    (``times.states_a_time``: "on Tuesday", "last week", "two days", "昨日") within the first
    ``TIME_READ_CHARS`` characters of each. One statement over the primary key reads those; they are
    matched in Python (a pattern of every form costs ~50 µs a turn in PostgreSQL)."""
    if not ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.id, left(m.title, %s), left(m.text, %s) FROM memories_memory m WHERE m.id = ANY(%s)",
            [TIME_READ_CHARS, TIME_READ_CHARS, list(ids)],
        )
        return {memory_id for memory_id, title, text in cursor.fetchall() if states_a_time(f"{title}\n{text}")}


def naming_identifiers(ids, identifiers: list[str]) -> dict[uuid.UUID, int]:
    """memory id → how many of ``identifiers`` (lower-case: ``lexical.query_identifiers``) the title
    or text of each of ``ids`` (candidates of this search) names as a whole (``lexical.identifiers_named_in``),
    for those naming at least one. One statement over the primary key reads them whole (an identifier
    may stand anywhere in a note); they are matched in Python, in NFKC as the query is (PostgreSQL's
    ``normalize`` doubled the statement's time: bench/RESULTS.md, "A note that names the query's
    identifier")."""
    if not ids or not identifiers:
        return {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT m.id, m.title, m.text FROM memories_memory m WHERE m.id = ANY(%s)", [list(ids)])
        found = cursor.fetchall()
    counts = {memory_id: identifiers_named_in(f"{title}\n{text}", identifiers) for memory_id, title, text in found}
    return {memory_id: count for memory_id, count in counts.items() if count}


def occurring_within(ids, periods: list[tuple]) -> set[uuid.UUID]:
    """Those of ``ids`` (candidates of this search) whose ``occurred_at`` falls within one of
    ``periods`` (``[start, end)`` pairs: ``times.periods_named``). One statement over the primary key."""
    if not ids or not periods:
        return set()
    starts, ends = zip(*periods, strict=True)
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT m.id FROM memories_memory m
               WHERE m.id = ANY(%s) AND EXISTS (
                   SELECT FROM unnest(%s::timestamptz[], %s::timestamptz[]) AS p(start, stop)
                   WHERE m.occurred_at >= p.start AND m.occurred_at < p.stop)""",
            [list(ids), list(starts), list(ends)],
        )
        return {memory_id for (memory_id,) in cursor.fetchall()}


def memories_by_id(ids: list[uuid.UUID]) -> tuple[dict[uuid.UUID, Memory], dict[uuid.UUID, list[tuple]]]:
    """The memories with these ids (ids the candidate stage found in this transaction), and each
    one's supersession links for ``memory_statuses(links=...)``: memory id → [(replacement id,
    partial), …] oldest first. One statement, without the ORM's query compilation."""
    if not ids:
        return {}, {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT {_MEMORY_COLUMNS}, links.new_ids, links.partials FROM memories_memory m
                LEFT JOIN LATERAL ({SUPERSESSION_LINKS_LATERAL}) links ON true
                WHERE m.id = ANY(%s)""",
            [list(ids)],
        )
        found = cursor.fetchall()
    memories, links = {}, {}
    for *values, new_ids, partials in found:
        memory = rows.model_from_row(Memory, _MEMORY_FIELDS, values, alias=connection.alias)
        memories[memory.id] = memory
        links[memory.id] = list(zip(new_ids, partials, strict=True)) if new_ids else []
    return memories, links


def _similarities(rows, backend: EmbeddingBackend) -> dict:
    """memory id → similarity of (memory id, cosine distance) rows, those above the model's floor."""
    found = {}
    for memory_id, distance in rows:
        similarity = 1.0 - float(distance)
        if similarity >= backend.similarity_floor:
            found[memory_id] = similarity
    return found


def _dense_exact(*, scoped: QuerySet, principal, vector, backend: EmbeddingBackend) -> dict:
    """memory id → similarity by an exact scan of the whole scope."""
    # Cast to the model's dimension, as hnsw_statement; "+ 0.0" keeps the planner off the index: an
    # exact scan, the distance computed once.
    distance = CosineDistance(Cast("embedding", output_field=VectorField(dimensions=backend.dimension)), vector)
    rows = MemoryEmbedding.objects.for_tenant(principal.tenant).filter(model=backend.model_id, memory__in=scoped)
    ordered = rows.annotate(distance=distance + 0.0).order_by("distance")
    return _similarities(ordered.values_list("memory_id", "distance")[:CANDIDATES], backend)


# The HNSW index with iterative scan, forced: the planner would pick the exact plan and take 300+ ms
# on a large scope. SET LOCAL: they end with the transaction.
HNSW_SETTINGS = (
    "SET LOCAL hnsw.iterative_scan = relaxed_order",
    "SET LOCAL hnsw.ef_search = 200",
    "SET LOCAL enable_sort = off",
)


def hnsw_statement(vector, *, scope: SearchScope, tenant_id, backend: EmbeddingBackend) -> tuple[str, list]:
    """The ``CANDIDATES`` nearest memories of ``scope`` to ``vector`` from the model's HNSW index, as
    (memory id, cosine distance) rows; to run with ``HNSW_SETTINGS`` in force."""
    dimension = int(backend.dimension)
    # Cast to the model's dimension: the expression its partial HNSW index is built on.
    sql = f"""SELECT e.memory_id, e.embedding::vector({dimension}) <=> %s::vector({dimension}) AS distance
        FROM memories_memoryembedding e
        WHERE e.tenant_id = %s AND e.model = %s
          AND e.memory_id IN (SELECT memories_memory.id FROM memories_memory WHERE ({scope.where}))
        ORDER BY distance LIMIT %s"""
    return sql, [Vector(vector).to_text(), tenant_id, backend.model_id, *scope.where_params, CANDIDATES]


def hnsw_follow_up(vector, dense_rows: list, *, scope: SearchScope, tenant_id, backend) -> tuple[str, list] | None:
    """What a side connection runs after ``dense_statement`` (``retrieval.side``): the HNSW k-NN,
    settings included, when its rows say the scope takes that path; else None."""
    if not dense_rows or dense_rows[0][2] is not True:
        return None
    sql, params = hnsw_statement(vector, scope=scope, tenant_id=tenant_id, backend=backend)
    return "; ".join([*HNSW_SETTINGS, sql]), params


def _hnsw_rows(*, scope: SearchScope, tenant_id, vector, backend: EmbeddingBackend) -> list[tuple]:
    """The rows of ``hnsw_statement``, run on this connection."""
    sql, params = hnsw_statement(vector, scope=scope, tenant_id=tenant_id, backend=backend)
    with connection.cursor() as cursor:
        for setting in HNSW_SETTINGS:
            cursor.execute(setting)
        try:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        finally:
            cursor.execute("SET LOCAL enable_sort = on")  # survives savepoints: restore it
    return rows
