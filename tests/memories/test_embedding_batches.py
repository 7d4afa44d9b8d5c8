"""Embedding tasks claim their tenant's pending backlog in batches, and never the same memory twice.

No worker runs in this module: the tests call the task and the claim directly.
"""

import pytest

from memory_service.memories.models import Memory
from tenants.context import tenant_context


def _status(tenant, memory_id) -> str:
    with tenant_context(tenant.id):
        return Memory.objects.get(id=memory_id).embedding_status


@pytest.mark.django_db
def test_one_task_embeds_the_backlog_of_its_tenant_in_one_batch(write, tenant, other_tenant, other_client, settings):
    from memory_service.memories.tasks import embed_memories_task

    ids = [write(text=f"burst note number {n}").json()["id"] for n in range(12)]
    theirs = other_client.post("/api/v1/memories", {"scope": "user", "user": "u9", "text": "not mine"},
                               format="json").json()["id"]  # fmt: skip
    settings.EMBEDDING_TASK_BATCH = 8
    embed_memories_task(str(tenant.id), [ids[-1]])
    with tenant_context(tenant.id):
        ready = set(Memory.objects.filter(embedding_status="ready").values_list("id", flat=True))
    # Its own memory, and the eight oldest other pending memories of its tenant only.
    assert {str(i) for i in ready} == {ids[-1], *ids[:8]}
    embed_memories_task(str(tenant.id), [ids[-1]])  # a task queued behind finds the rest
    assert all(_status(tenant, i) == "ready" for i in ids)
    assert _status(other_tenant, theirs) == "pending"


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_concurrent_tasks_never_claim_the_same_memory(api_client, tenant):
    import threading

    from django.db import connection

    from memory_service.memories.embedding import claim_pending_memory_ids

    for n in range(6):
        api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": f"claim me {n}"}, format="json")
    first_claimed, release = threading.Event(), threading.Event()
    claims = {}

    def claimer(name):
        try:
            with tenant_context(tenant.id):
                claims[name] = claim_pending_memory_ids(tenant_id=str(tenant.id), memory_ids=[], extra=4)
                first_claimed.set()
                release.wait(10)
        finally:
            connection.close()

    first = threading.Thread(target=claimer, args=("first",))
    first.start()
    first_claimed.wait(10)
    second = threading.Thread(target=claimer, args=("second",))
    second.start()
    second.join(10)
    release.set()
    first.join(10)
    assert len(claims["first"]) == 4 and len(claims["second"]) == 2
    assert not set(claims["first"]) & set(claims["second"])
