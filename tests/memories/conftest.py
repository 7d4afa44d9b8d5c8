import pytest
from django.test import override_settings

from memory_service.embeddings.backends import get_backend
from memory_service.memories.embedding import embed_memories, pending_memory_ids
from memory_service.retrieval import side
from tenants.context import tenant_context


@pytest.fixture
def side_connections():
    """Two side connections, open and ready; closed again after the test. Yields the pool's stats
    function, to show that searches used them."""
    side.close_side_pool()
    with override_settings(SEARCH_SIDE_CONNECTIONS=2):
        side.side_pool().wait(timeout=10)
        yield side.side_pool().get_stats
    side.close_side_pool()


@pytest.fixture
def write(api_client):
    """POST a memory as the test tenant's all-permission token; returns the response."""

    def _write(**fields):
        body = {"scope": "user", "user": "u1", "kind": "note"} | fields
        return api_client.post("/api/v1/memories", body, format="json")

    return _write


@pytest.fixture
def embed_all(tenant):
    """Embed every pending memory of ``tenant`` with the real backend, as the worker would."""

    def _embed():
        with tenant_context(tenant.id):
            ids = pending_memory_ids(tenant_id=str(tenant.id), limit=10_000)
            return embed_memories(tenant_id=str(tenant.id), memory_ids=ids, backend=get_backend())

    return _embed
