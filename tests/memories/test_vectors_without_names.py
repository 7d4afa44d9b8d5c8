"""Memories and queries are embedded without people's labels and pseudonyms; the full-text stage
matches the pseudonyms alone (``pii.text_for_embedding``, ``pii.pseudonyms_only``)."""

import re

import numpy as np
import pytest

from memory_service.embeddings.backends import get_backend
from memory_service.memories.embedding import embed_memories, embedding_document
from memory_service.memories.models import Memory, MemoryEmbedding
from memory_service.retrieval import search
from memory_service.retrieval.search import memory_search
from tenants.access import Principal
from tenants.context import tenant_context
from tenants.models import ApiToken

pytestmark = pytest.mark.django_db

PSEUDONYM = re.compile(r"<PERSON_[0-9a-f]{12}>")


def _write(client, text):
    response = client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": text}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_memory_s_vector_leaves_the_person_out_and_keeps_the_rest(api_client, tenant):
    written = _write(api_client, "Priya Raman moved the cut-over to Friday; mail her at priya@example.com.")
    stored = written["text"]
    assert PSEUDONYM.search(stored), stored  # the stored text keeps the pseudonym
    with tenant_context(tenant.id):
        memory = Memory.objects.get(id=written["id"])
        document = embedding_document(memory)
        assert embed_memories(tenant_id=str(tenant.id), memory_ids=[str(memory.id)]) == 1
        vector = np.array(MemoryEmbedding.objects.get(memory=memory, model="usem3").embedding, dtype=float)

    assert "<PERSON" not in document
    assert document.startswith(" moved the cut-over to Friday; mail her at <EMAIL_ADDRESS>.")
    backend = get_backend()
    assert np.allclose(vector, backend.embed_passages([document])[0], atol=1e-3)
    with_name = backend.embed_passages([stored])[0]
    assert not np.allclose(vector, with_name, atol=1e-3)


def test_a_query_is_embedded_without_the_person_and_matched_with_it_in_full_text(api_client, tenant, monkeypatch):
    about = _write(api_client, "Kenji Watanabe rebuilt the boat's engine over the winter.")
    _write(api_client, "The marina raised the winter storage fee for every boat.")
    embedded = []
    real = search.embed_query_in_background

    def recording(backend, text):
        embedded.append(text)
        return real(backend, text)

    monkeypatch.setattr(search, "embed_query_in_background", recording)
    response = api_client.post("/api/v1/search", {"query": "What did Kenji Watanabe fix?", "user": "u1"}, format="json")

    assert response.status_code == 200, response.content
    assert embedded == ["fix"]  # the person out, and the question's opening (query_for_embedding)
    assert [item["id"] for item in response.json()["items"]][0] == about["id"]  # the pseudonym, in full text


def test_another_tenant_s_search_never_sees_the_memory(api_client, other_client, tenant):
    _write(api_client, "Kenji Watanabe rebuilt the boat's engine over the winter.")
    response = other_client.post(
        "/api/v1/search", {"query": "What did Kenji Watanabe fix?", "user": "u1"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["items"] == []


def test_a_search_for_a_person_matches_their_notes_alone_in_full_text(api_client, tenant):
    kenji = _write(api_client, "Kenji Watanabe fixed the flaky deploy job.")["id"]
    for name in ("Priya Raman", "Olga Petrova", "Maria Gonzalez"):
        _write(api_client, f"{name} reviewed the release notes.")

    with tenant_context(tenant.id):
        principal = Principal.from_token(ApiToken.objects.get(tenant=tenant))
        hits = memory_search(principal=principal, query="Kenji Watanabe", user="u1").hits

    # Not "person": it is in every note that names anyone.
    assert [str(hit.memory.id) for hit in hits if hit.lexical is not None] == [kenji]
