"""Erasing a user (or deleting a memory) while the embedder writes the vector of one of the memories
concerned: the removal waits for the vector and removes it too, instead of failing at commit."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from memory_service.embeddings.backends import get_backend
from memory_service.memories.embedding import embed_memories
from memory_service.memories.models import Memory, MemoryEmbedding
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])


class GatedBackend:
    """The real embedding model, held after the embedder has locked its memories and before it
    writes their vectors, until ``release`` is set."""

    def __init__(self):
        self.backend = get_backend()
        self.model_id, self.dimension = self.backend.model_id, self.backend.dimension
        self.locked, self.release = threading.Event(), threading.Event()

    def embed_passages(self, texts):
        vectors = self.backend.embed_passages(texts)
        self.locked.set()
        assert self.release.wait(30)
        return vectors


def wait_for_a_lock_wait(timeout: float = 30) -> None:
    """Return once some connection to the test database waits for a row lock."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:  # the role of the threads: it may see their waits
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("nothing waited for the embedder's lock")


def in_thread(fn):
    """``fn`` for a worker thread: it uses, then closes, a connection of its own."""

    def run():
        try:
            return fn()
        finally:
            connection.close()

    return run


def race(tenant, memory_id: str, removal) -> tuple[int, object]:
    """Run ``removal()`` while an embedder holds ``memory_id`` locked and is about to write its vector;
    let the embedder go only once the removal waits for it. Returns (vectors written, removal's result)."""
    backend = GatedBackend()

    def embed():
        with tenant_context(tenant.id):
            return embed_memories(tenant_id=str(tenant.id), memory_ids=[memory_id], backend=backend)

    with ThreadPoolExecutor(2) as pool:
        embedding = pool.submit(in_thread(embed))
        assert backend.locked.wait(30)
        removing = pool.submit(in_thread(removal))
        try:
            wait_for_a_lock_wait()
        finally:
            backend.release.set()
        return embedding.result(timeout=60), removing.result(timeout=60)


def test_it_erases_a_user_while_the_vector_of_their_memory_is_being_written():
    tenant = make_tenant("racing")
    client = client_for(make_token(tenant, permissions=["memory:write", "admin"]).raw)
    written = client.post("/api/v1/memories", {"scope": "user", "user": "u7", "text": "A lesson being embedded"},
                          format="json")  # fmt: skip
    memory_id = written.json()["id"]

    embedded, response = race(tenant, memory_id, lambda: client.post("/api/v1/erasures", {"user": "u7"}, format="json"))

    assert embedded == 1
    assert response.status_code == 200, response.content
    assert response.json()["memories"] == 1 and response.json()["embeddings"] == 1
    with tenant_context(tenant.id):
        assert not Memory.objects.filter(id=memory_id).exists()
        assert not MemoryEmbedding.objects.filter(memory_id=memory_id).exists()


def test_it_deletes_a_memory_while_its_vector_is_being_written():
    tenant = make_tenant("racing-delete")
    client = client_for(make_token(tenant, permissions=["memory:read", "memory:write"]).raw)
    written = client.post("/api/v1/memories", {"scope": "user", "user": "u7", "text": "A note being embedded"},
                          format="json")  # fmt: skip
    memory_id = written.json()["id"]

    embedded, response = race(tenant, memory_id, lambda: client.delete(f"/api/v1/memories/{memory_id}"))

    assert embedded == 1
    assert response.status_code == 204, response.content
    with tenant_context(tenant.id):
        assert not Memory.objects.filter(id=memory_id).exists()
        assert not MemoryEmbedding.objects.filter(memory_id=memory_id).exists()
