"""A short reply in a transcript is embedded with the turn it answers (``embedding.reply_context``),
and its vectors follow that turn: edited or deleted, whichever path, the reply is pending again
(migration 0021)."""

import numpy as np
import pytest
from django.db import connection

from memory_service.embeddings.backends import get_backend
from memory_service.memories.embedding import embed_memories, embedding_document, embedding_documents
from memory_service.memories.models import EmbeddingStatus, Memory, MemoryEmbedding
from tenants.context import tenant_context

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

QUESTION = "Caroline: Did they give you anything when you left the clinic?"
REPLY = "Melanie: Yes, on the train. A stethoscope engraved with a little wave."
LONG = "Caroline: " + " ".join(["that sounds like a lovely way to say goodbye to a place"] * 4)


def _bulk(client, texts, user="u1"):
    items = [{"scope": "user", "user": user, "kind": "note", "text": text,
              "occurred_at": f"2026-05-08T13:{minute:02d}:00Z"} for minute, text in enumerate(texts)]  # fmt: skip
    response = client.post("/api/v1/memories/bulk", {"items": items}, format="json")
    assert response.status_code == 200, response.content
    return [r["memory"]["id"] for r in response.json()["results"]]


def _documents(tenant, ids):
    with tenant_context(tenant.id):
        memories = {str(m.id): m for m in Memory.objects.filter(id__in=ids)}
        return dict(zip(ids, embedding_documents([memories[i] for i in ids]), strict=True))


def _state(tenant, memory_id):
    """(embedding status, how many vectors) of one memory."""
    with tenant_context(tenant.id):
        status = Memory.objects.get(id=memory_id).embedding_status
        return status, MemoryEmbedding.objects.filter(memory_id=memory_id).count()


def test_a_short_reply_is_embedded_with_the_turn_it_answers_and_nothing_else_is(api_client, tenant, embed_all):
    ids = _bulk(api_client, [QUESTION, REPLY, LONG, "Melanie: Thanks!"])
    notes = _bulk(api_client, ["the deploy needs the new flag", "ship it on Friday"], user="u2")
    documents = _documents(tenant, ids + notes)
    assert "Did they give you anything" in documents[ids[1]]
    assert documents[ids[1]].index("Did they give") < documents[ids[1]].index("stethoscope")
    assert "stethoscope" not in documents[ids[0]]  # the first turn answers nothing
    assert "stethoscope" not in documents[ids[2]]  # a long turn stands on its own
    assert "lovely way" in documents[ids[3]]  # a short reply to a long turn
    assert "deploy" not in documents[notes[1]]  # notes that are no transcript's turns
    assert "Caroline" not in documents[ids[1]] and "PERSON" not in documents[ids[1]]  # names stay out
    embed_all()
    with tenant_context(tenant.id):
        stored = MemoryEmbedding.objects.get(memory_id=ids[1], model=get_backend().model_id).embedding
        alone = embedding_document(Memory.objects.get(id=ids[1]))
    expected, own = get_backend().embed_passages([documents[ids[1]], alone])
    assert np.allclose(stored, expected, atol=1e-6)
    assert not np.allclose(stored, own, atol=1e-3)


def test_of_a_long_turn_a_reply_is_given_the_end_only(api_client, tenant):
    opening = "Caroline: " + " ".join(["the harbour was busy"] * 40)
    ids = _bulk(api_client, [opening + " and did they give you anything at the clinic?", REPLY])
    document = _documents(tenant, ids)[ids[1]]
    assert "did they give you anything at the clinic?" in document
    assert document.count("harbour") < 40 and len(document.split()) < 72 + 20


def test_editing_or_deleting_the_turn_before_makes_the_reply_pending_again(api_client, tenant, embed_all):
    ids = _bulk(api_client, [QUESTION, REPLY, "Caroline: Oh, that is sweet.", "Melanie: It was."])
    embed_all()
    assert [_state(tenant, i)[0] for i in ids] == [EmbeddingStatus.READY] * 4
    edited = "Caroline: What did your colleagues bake for your last day?"
    assert api_client.patch(f"/api/v1/memories/{ids[0]}", {"text": edited}, format="json").status_code == 200
    assert _state(tenant, ids[1]) == (EmbeddingStatus.PENDING, 0)
    assert _state(tenant, ids[2])[0] == EmbeddingStatus.READY  # two turns away: untouched
    embed_all()
    assert _state(tenant, ids[1])[0] == EmbeddingStatus.READY
    assert "bake" in _documents(tenant, [ids[1]])[ids[1]]
    # Deleted through the API, or by a statement that bypasses the service: the reply after it follows.
    assert api_client.delete(f"/api/v1/memories/{ids[1]}").status_code == 204
    assert _state(tenant, ids[2]) == (EmbeddingStatus.PENDING, 0)
    embed_all()
    with tenant_context(tenant.id), connection.cursor() as cursor:
        cursor.execute("DELETE FROM memories_memoryembedding WHERE memory_id = %s", [ids[2]])
        cursor.execute("DELETE FROM memories_memory WHERE id = %s", [ids[2]])
    assert _state(tenant, ids[3]) == (EmbeddingStatus.PENDING, 0)
    embed_all()
    assert _state(tenant, ids[3])[0] == EmbeddingStatus.READY
    assert "sweet" not in _documents(tenant, [ids[3]])[ids[3]]


def test_only_the_first_note_linked_to_a_turn_is_given_it(api_client, tenant, embed_all):
    """A note written later with an earlier time is linked to a turn that already has its reply:
    it keeps its own text, and an edit of the turn makes only the first reply pending."""
    ids = _bulk(api_client, [QUESTION, REPLY])
    note = {"scope": "user", "user": "u1", "kind": "note", "text": "Melanie: And a card.",
            "occurred_at": "2026-05-08T13:00:30Z"}  # fmt: skip
    late = api_client.post("/api/v1/memories", note, format="json")
    assert late.status_code == 201, late.content
    late_id = late.json()["id"]
    with tenant_context(tenant.id):
        assert str(Memory.objects.get(id=late_id).thread_previous_id) == ids[0]
    documents = _documents(tenant, [ids[1], late_id])
    assert "Did they give you anything" in documents[ids[1]]
    assert "Did they give you anything" not in documents[late_id]
    embed_all()
    assert api_client.patch(f"/api/v1/memories/{ids[0]}", {"text": "Caroline: hi"}, format="json").status_code == 200
    assert _state(tenant, ids[1]) == (EmbeddingStatus.PENDING, 0)
    assert _state(tenant, late_id) == (EmbeddingStatus.READY, 1)


def test_another_tenants_edit_never_reaches_our_replies(api_client, other_client, tenant, other_tenant, embed_all):
    ours, theirs = _bulk(api_client, [QUESTION, REPLY]), _bulk(other_client, [QUESTION, REPLY])
    embed_all()
    with tenant_context(other_tenant.id):
        embed_memories(tenant_id=str(other_tenant.id), memory_ids=theirs, backend=get_backend())
    assert _state(other_tenant, theirs[1]) == (EmbeddingStatus.READY, 1)
    edit = {"text": "Caroline: hi"}
    assert other_client.patch(f"/api/v1/memories/{ours[0]}", edit, format="json").status_code == 404
    assert other_client.patch(f"/api/v1/memories/{theirs[0]}", edit, format="json").status_code == 200
    assert _state(tenant, ours[1]) == (EmbeddingStatus.READY, 1)
    assert _state(other_tenant, theirs[1]) == (EmbeddingStatus.PENDING, 0)
