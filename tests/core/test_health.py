import pytest

from memory_service.pii import get_masker
from memory_service.pii.helper import shared_helper
from memory_service.redis import get_redis
from memory_service.workers import HEARTBEAT_KEY, worker_heartbeat_record

pytestmark = pytest.mark.django_db


def test_it_is_alive(anonymous_client):
    assert anonymous_client.get("/healthz").json() == {"status": "ok"}


def test_it_is_ready_when_database_redis_and_a_worker_answer(anonymous_client):
    worker_heartbeat_record()
    response = anonymous_client.get("/readyz")
    assert response.status_code == 200
    checks = response.json()["checks"]
    assert checks["database"]["ok"] and checks["redis"]["ok"] and checks["worker"]["ok"]


def test_it_reports_the_name_tier_loaded_from_the_default_install(anonymous_client, settings):
    """`make run` and `make test` install the same packages (requirements/base.txt, models.txt)."""
    settings.PII_HELPER_PROCESS = True
    worker_heartbeat_record()
    pii = anonymous_client.get("/readyz").json()["checks"]["pii"]
    assert pii["tiers"] == ["ner", "regex"]
    assert pii["name_languages"] == ["en", "ja"]
    assert pii["version"] == "pii-8/regex+ner"
    assert pii["helper"] in ("loading", "ready")


def test_it_reports_the_masking_helper_once_loaded_or_off(anonymous_client, settings):
    from tests.pii.test_helper import wait_until_ready

    settings.PII_HELPER_PROCESS = True
    worker_heartbeat_record()
    wait_until_ready(shared_helper(), get_masker().version)
    assert anonymous_client.get("/readyz").json()["checks"]["pii"]["helper"] == "ready"
    settings.PII_HELPER_PROCESS = False
    assert anonymous_client.get("/readyz").json()["checks"]["pii"]["helper"] == "off"


def test_it_is_not_ready_without_a_worker_heartbeat(anonymous_client):
    get_redis().delete(HEARTBEAT_KEY)
    response = anonymous_client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["checks"]["worker"] == {
        "ok": False,
        "detail": "no worker heartbeat",
        "ms": pytest.approx(0, abs=500),
    }


def test_it_serves_the_openapi_schema_docs_and_metrics(anonymous_client):
    schema = anonymous_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    spec = schema.json()
    assert spec["openapi"].startswith("3.")
    assert "/api/v1/memories" in spec["paths"]
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert anonymous_client.get("/api/docs/").status_code == 200
    metrics = anonymous_client.get("/metrics")
    assert metrics.status_code == 200 and b"django_http_requests" in metrics.content


OUTSIDER = "203.0.113.50"


@pytest.fixture
def fresh_embedding_probe(monkeypatch):
    """Forget the cached embedding probe, and count the probes that embed."""
    import memory_service.embeddings as embeddings
    import memory_service.health as health

    monkeypatch.setattr(health, "_embedding_probe", None)
    backend = embeddings.get_backend()
    calls = []

    class Counting:
        model_id, dimension = backend.model_id, backend.dimension

        def embed_query(self, text):
            calls.append(text)
            return backend.embed_query(text)

    monkeypatch.setattr(embeddings, "get_backend", lambda name=None: Counting())
    return calls


def test_it_tells_an_outsider_only_whether_it_is_ready(anonymous_client, fresh_embedding_probe):
    worker_heartbeat_record()
    ready = anonymous_client.get("/readyz", REMOTE_ADDR=OUTSIDER)
    assert ready.status_code == 200 and ready.json() == {"status": "ok"}
    get_redis().delete(HEARTBEAT_KEY)
    unready = anonymous_client.get("/readyz", REMOTE_ADDR=OUTSIDER)
    assert unready.status_code == 503 and unready.json() == {"status": "unavailable"}


def test_it_shows_the_readiness_details_to_the_metrics_token(anonymous_client, settings, fresh_embedding_probe):
    settings.METRICS_TOKEN = "metrics-secret-1"
    worker_heartbeat_record()
    wrong = anonymous_client.get("/readyz", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer metrics-secret-2")
    assert wrong.json() == {"status": "ok"}
    right = anonymous_client.get("/readyz", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer metrics-secret-1")
    assert set(right.json()["checks"]) == {"database", "redis", "worker", "embedding", "pii"}
    local = anonymous_client.get("/readyz", REMOTE_ADDR="::1")
    assert local.json()["checks"]["embedding"]["ok"] is True


def test_it_reuses_its_embedding_probe_for_a_few_seconds(anonymous_client, settings, fresh_embedding_probe):
    settings.READINESS_EMBEDDING_CACHE_SECONDS = 60
    for _ in range(3):
        assert anonymous_client.get("/readyz").json()["checks"]["embedding"]["ok"] is True
    assert len(fresh_embedding_probe) == 1
    settings.READINESS_EMBEDDING_CACHE_SECONDS = 0
    for _ in range(2):
        anonymous_client.get("/readyz")
    assert len(fresh_embedding_probe) == 3


def test_it_serves_metrics_only_to_loopback_clients_and_the_metrics_token(anonymous_client, settings):
    assert anonymous_client.get("/metrics").status_code == 200
    assert anonymous_client.get("/metrics", REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200
    refused = anonymous_client.get("/metrics", REMOTE_ADDR=OUTSIDER)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert b"django_http_requests" not in refused.content
    # Without a configured token, no bearer opens it.
    assert anonymous_client.get("/metrics", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer ").status_code == 403

    settings.METRICS_TOKEN = "metrics-secret-1"
    wrong = anonymous_client.get("/metrics", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer metrics-secret-2")
    assert wrong.status_code == 403
    right = anonymous_client.get("/metrics", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer metrics-secret-1")
    assert right.status_code == 200 and b"django_http_requests" in right.content
