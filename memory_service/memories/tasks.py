"""Embedding work for Celery: tasks receive ids only and read masked text from the database."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import connection

from memory_service.memories.embedding import claim_pending_memory_ids, embed_memories, pending_memory_ids
from tenants.context import tenant_context

logger = logging.getLogger(__name__)

SWEEP_BATCH = 256


@shared_task(name="memory_service.memories.tasks.embed_memories_task", acks_late=True, ignore_result=True)
def embed_memories_task(tenant_id: str, memory_ids: list[str]) -> None:
    """Embed these memories of one tenant, and up to ``EMBEDDING_TASK_BATCH`` others still pending,
    in one batch: under a burst of writes the first task embeds the backlog and the tasks queued
    behind it find little left to do. Idempotent: memories already embedded are skipped."""
    with tenant_context(tenant_id):
        ids = claim_pending_memory_ids(tenant_id=tenant_id, memory_ids=memory_ids, extra=settings.EMBEDDING_TASK_BATCH)
        if ids:
            embed_memories(tenant_id=tenant_id, memory_ids=ids)


@shared_task(name="memory_service.memories.tasks.embed_pending_sweep", ignore_result=True)
def embed_pending_sweep() -> int:
    """Embed whatever is still pending in every active tenant (writes made while the broker or
    the embedder was down). Returns how many memories it embedded."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT app_active_tenant_ids()")
        tenant_ids = [str(row[0]) for row in cursor.fetchall()]
    done = 0
    for tenant_id in tenant_ids:
        while True:
            with tenant_context(tenant_id):
                ids = pending_memory_ids(tenant_id=tenant_id, limit=SWEEP_BATCH)
                if not ids:
                    break
                embedded = embed_memories(tenant_id=tenant_id, memory_ids=ids)
            done += embedded
            if embedded < len(ids):
                break  # the embedder failed; try again at the next sweep
    return done


def enqueue_embedding(*, tenant_id: str, memory_ids: list[str]) -> bool:
    """Publish the embedding task without retrying; False (and a log line) when the broker is down."""
    try:
        embed_memories_task.apply_async(args=[tenant_id, memory_ids], retry=False)
    except Exception as exc:  # any broker failure: the write stands, the sweep embeds it later
        logger.warning("embedding not queued; the sweep will embed it", extra={"error": type(exc).__name__})
        return False
    return True
