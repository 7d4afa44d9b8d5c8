import pytest

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
