"""Embedding work for Celery: tasks receive ids only and read masked text from the database."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import connection

from memory_service.embeddings.backends import get_rescore_backend
from memory_service.memories.embedding import claim_pending_memory_ids, embed_memories, pending_memory_ids
from tenants.context import tenant_context

logger = logging.getLogger(__name__)

SWEEP_BATCH = 256
# Re-scoring vectors one sweep adds at most (~10–20 s of e5 on one core at 50–90 memories/s): a
# backfill of existing memories goes on sweep after sweep (every 30 s) without holding a worker
# process for an hour.
RESCORE_SWEEP_MAX = 1024
# Re-scoring vectors are stored this many memories per transaction (~0.5 s of e5): the rows being
# embedded are locked, so an edit of one of them waits at most that long.
RESCORE_BATCH = 32


@shared_task(name="memory_service.memories.tasks.embed_memories_task", acks_late=True, ignore_result=True)
def embed_memories_task(tenant_id: str, memory_ids: list[str]) -> None:
    """Embed these memories of one tenant, and up to ``EMBEDDING_TASK_BATCH`` others still pending,
    in one batch: under a burst of writes the first task embeds the backlog and the tasks queued
    behind it find little left to do. Idempotent: memories already embedded are skipped."""
    with tenant_context(tenant_id):
        ids = claim_pending_memory_ids(tenant_id=tenant_id, memory_ids=memory_ids, extra=settings.EMBEDDING_TASK_BATCH)
        if ids:
            embed_memories(tenant_id=tenant_id, memory_ids=ids)
    # The re-scoring vectors in their own task, after this one's vectors are committed (searchable).
    if ids and get_rescore_backend() is not None:
        enqueue_rescore_vectors(tenant_id=tenant_id, memory_ids=ids)


@shared_task(name="memory_service.memories.tasks.rescore_vectors_task", acks_late=True, ignore_result=True)
def rescore_vectors_task(tenant_id: str, memory_ids: list[str]) -> None:
    """Store the re-scoring backend's vectors of these memories of one tenant (those that lack one).
    Nothing to do without a re-scoring backend. Until its vector is stored, a memory keeps the
    active model's similarity in searches (``retrieval.search.rescore``); the sweep stores what
    this task missed."""
    backend = get_rescore_backend()
    if backend is None:
        return
    for start in range(0, len(memory_ids), RESCORE_BATCH):
        with tenant_context(tenant_id):
            chunk = memory_ids[start : start + RESCORE_BATCH]
            embed_memories(tenant_id=tenant_id, memory_ids=chunk, backend=backend, mark_ready=False)


@shared_task(name="memory_service.memories.tasks.embed_pending_sweep", ignore_result=True)
def embed_pending_sweep() -> int:
    """Embed whatever is still pending in every active tenant (writes made while the broker or
    the embedder was down). Returns how many memories it embedded."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT app_active_tenant_ids()")
        tenant_ids = [str(row[0]) for row in cursor.fetchall()]
    done = 0
    for tenant_id in tenant_ids:
        done += _sweep_tenant(tenant_id, backend=None)
    rescorer = get_rescore_backend()
    if rescorer is not None:  # after every tenant's searchable vectors, a bounded share of re-scoring ones
        left = RESCORE_SWEEP_MAX
        for tenant_id in tenant_ids:
            left -= _sweep_tenant(tenant_id, backend=rescorer, limit=left)
            if left <= 0:
                break
    return done


def _sweep_tenant(tenant_id: str, *, backend, limit: int | None = None) -> int:
    """Embed the tenant's memories without a vector of ``backend`` (None: the active one), a batch
    per transaction, until none is left, ``limit`` are done or the embedder fails. Returns how many
    were embedded."""
    done = 0
    model = backend.model_id if backend is not None else None
    size = SWEEP_BATCH if backend is None else RESCORE_BATCH
    while limit is None or done < limit:
        batch = size if limit is None else min(size, limit - done)
        with tenant_context(tenant_id):
            ids = pending_memory_ids(tenant_id=tenant_id, limit=batch, model=model)
            if not ids:
                return done
            embedded = embed_memories(tenant_id=tenant_id, memory_ids=ids, backend=backend, mark_ready=backend is None)
        done += embedded
        if embedded < len(ids):
            return done  # the embedder failed; try again at the next sweep
    return done


def enqueue_rescore_vectors(*, tenant_id: str, memory_ids: list[str]) -> None:
    """Publish the re-scoring vectors' task without retrying (the sweep embeds what it misses)."""
    try:
        rescore_vectors_task.apply_async(args=[tenant_id, memory_ids], retry=False)
    except Exception as exc:  # any broker failure: the sweep embeds them later
        logger.warning("re-scoring vectors not queued; the sweep will embed them", extra={"error": type(exc).__name__})


def enqueue_embedding(*, tenant_id: str, memory_ids: list[str]) -> bool:
    """Publish the embedding task without retrying; False (and a log line) when the broker is down."""
    try:
        embed_memories_task.apply_async(args=[tenant_id, memory_ids], retry=False)
    except Exception as exc:  # any broker failure: the write stands, the sweep embeds it later
        logger.warning("embedding not queued; the sweep will embed it", extra={"error": type(exc).__name__})
        return False
    return True
