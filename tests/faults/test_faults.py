"""A write that returned 2xx is never lost, whatever happens to Redis, the worker, the database or
the embedder. Each test breaks only what it started itself."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import httpx
import pytest

from memory_service.memories.models import Memory, MemoryEmbedding
from tenants.context import tenant_context
from tests.conftest import broker_app, child_process_env, run_worker, serve_app
from tests.factories import make_tenant, make_token

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True, databases=["default", "admin"])]


def _wait_for(predicate, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _statuses(tenant, ids) -> list[str]:
    with tenant_context(tenant.id):
        by_id = dict(Memory.objects.filter(id__in=ids).values_list("id", "embedding_status"))
    return [by_id.get(uuid.UUID(i)) for i in ids]


def test_writes_succeed_while_redis_is_down_and_the_sweep_embeds_them_once_it_is_back(private_redis, django_db_blocker):
    tenant = make_tenant("redis-fault")
    token = make_token(tenant).raw
    env = child_process_env(django_db_blocker) | {"REDIS_URL": private_redis.url}
    with serve_app(env) as url:
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

        def write(n):
            return http.post("/api/v1/memories", json={"scope": "user", "user": "u1", "text": f"outage note {n}"})

        before = write(0)
        private_redis.stop()
        during = [write(n) for n in range(1, 6)]
        assert [r.status_code for r in during] == [201] * 5
        assert {r.json()["embedding_status"] for r in during} == {"pending"}
        readiness = http.get("/readyz")
        assert readiness.status_code == 503 and readiness.json()["checks"]["redis"]["ok"] is False
        found = http.post("/api/v1/search", json={"query": "outage note", "user": "u1", "top": 10}).json()
        assert len(found["items"]) == 6  # lexical search finds them at once
        private_redis.start()
        after = write(6)
        assert before.status_code == after.status_code == 201
    ids = [r.json()["id"] for r in (before, *during, after)]

    with run_worker(env, name="faults-redis", broker_url=private_redis.url):
        broker_app(private_redis.url).send_task("memory_service.memories.tasks.embed_pending_sweep")
        _wait_for(lambda: set(_statuses(tenant, ids)) == {"ready"}, what="the sweep to embed every write")
    with tenant_context(tenant.id):
        assert MemoryEmbedding.objects.filter(memory_id__in=ids).count() == len(ids)


def test_a_task_whose_worker_is_killed_runs_again_and_its_effect_happens_once(
    private_redis, fake_embedding_api, django_db_blocker, api_client, tenant
):
    memory_id = api_client.post(
        "/api/v1/memories", {"scope": "user", "user": "u1", "text": "embedded despite a crash"}, format="json"
    ).json()["id"]
    env = child_process_env(django_db_blocker) | fake_embedding_api.settings() | {
        "REDIS_URL": private_redis.url, "CELERY_VISIBILITY_TIMEOUT": "3", "EMBEDDING_TASK_BATCH": "0",
    }  # fmt: skip
    broker = broker_app(private_redis.url)
    with run_worker(env, name="faults-victim", broker_url=private_redis.url) as victim:
        broker.send_task("memory_service.memories.tasks.embed_memories_task", args=[str(tenant.id), [memory_id]])
        assert fake_embedding_api.first_request.wait(30), "the task never called the embedder"
        os.killpg(victim.pid, signal.SIGKILL)  # the worker and its pool, mid-task
        victim.wait(timeout=10)
    assert _statuses(tenant, [memory_id]) == ["pending"]
    fake_embedding_api.release.set()

    with run_worker(env, name="faults-heir", broker_url=private_redis.url):
        _wait_for(lambda: _statuses(tenant, [memory_id]) == ["ready"], what="the task to run again")
        time.sleep(4)  # longer than the visibility timeout: a third delivery would show now
    assert fake_embedding_api.requests >= 2
    with tenant_context(tenant.id):
        vectors = list(MemoryEmbedding.objects.filter(memory_id=memory_id).values_list("model", flat=True))
    assert vectors == ["openai:fake"]


#: How long the database stays down: longer than the pool's 10 s wait for a connection, so that
#: requests must fail (503 with Retry-After), not just wait.
OUTAGE_SECONDS = float(os.environ.get("FAULTS_PG_OUTAGE_SECONDS", 13))


def test_the_service_survives_the_database_killed_for_longer_than_the_pool_waits(private_postgres, django_db_blocker):
    """Writes flow; the postmaster is SIGKILLed and stays down for longer than the pool waits; it
    comes back through crash recovery. Callers got 503 with Retry-After meanwhile, every write
    acknowledged before or after is stored, and the same server process serves again."""
    env = os.environ | {
        "DATABASE_URL": private_postgres.app_url,
        "ADMIN_DATABASE_URL": private_postgres.owner_url,
        "DJANGO_SETTINGS_MODULE": "memory_service.settings.base",
        "RATE_LIMIT_PER_MINUTE": "0",
    }
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True)
    slug = f"pg-{uuid.uuid4().hex[:8]}"
    created = subprocess.run([*manage, "create_tenant", slug, "--token-name", "agent", "--json"], env=env,
                             check=True, capture_output=True, text=True)  # fmt: skip
    token = json.loads(created.stdout)["token"]
    acknowledged, failures, retry_after, spans, stop, outage = [], [], [], [], threading.Event(), {}

    with serve_app(env) as url:
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

        def traffic():
            n = 0
            while not stop.is_set():
                n += 1
                body = {"scope": "user", "user": "u1", "text": f"durable write {n}", "external_id": f"w{n}"}
                sent = time.monotonic()
                try:
                    response = http.post("/api/v1/memories", json=body)
                except httpx.HTTPError:
                    failures.append("connection")
                    continue
                finally:
                    spans.append((sent, time.monotonic()))
                if response.status_code == 201:
                    acknowledged.append(body["external_id"])
                else:
                    failures.append(response.status_code)
                    retry_after.append(response.headers.get("Retry-After"))
                    assert response.json()["error"]["code"]  # the one error shape, even now
                time.sleep(0.02)

        writer = threading.Thread(target=traffic)
        writer.start()
        try:
            _wait_for(lambda: len(acknowledged) >= 20, what="writes before the crash")
            outage["from"] = time.monotonic()
            private_postgres.kill()
            time.sleep(OUTAGE_SECONDS)
            private_postgres.start()
            outage["to"] = time.monotonic()
            restarted_at = len(acknowledged)
            _wait_for(lambda: len(acknowledged) >= restarted_at + 30, timeout=60, what="writes after recovery")
        finally:
            stop.set()
            writer.join(timeout=60)
        assert http.get("/readyz").json()["checks"]["database"]["ok"] is True

    import psycopg

    with psycopg.connect(private_postgres.owner_url) as conn:
        stored = {row[0] for row in conn.execute("SELECT external_id FROM memories_memory WHERE external_id <> ''")}
    assert set(acknowledged) <= stored
    assert any(sent < outage["to"] and done > outage["from"] for sent, done in spans)  # in flight during it
    assert 503 in failures and all(code in ("connection", 503) for code in failures), failures
    assert all(value is not None and int(value) >= 1 for value in retry_after), retry_after


def test_search_degrades_to_lexical_and_says_so_while_the_embedder_fails(django_db_blocker):
    tenant = make_tenant("embedder-fault")
    token = make_token(tenant).raw
    broken = {"EMBEDDING_BACKEND": "openai", "EMBEDDING_URL": "http://127.0.0.1:9", "EMBEDDING_MODEL": "gone",
              "EMBEDDING_DIMENSION": "8", "EMBEDDING_TIMEOUT": "1"}  # fmt: skip
    with serve_app(child_process_env(django_db_blocker) | broken) as url:
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        written = http.post("/api/v1/memories", json={"scope": "user", "user": "u1", "text": "retry with backoff"})
        assert written.status_code == 201 and written.json()["embedding_status"] == "pending"
        found = http.post("/api/v1/search", json={"query": "backoff", "user": "u1"})
        assert found.status_code == 200 and found.json()["degraded"] is True
        assert [item["text"] for item in found.json()["items"]] == ["retry with backoff"]
        readiness = http.get("/readyz").json()
        assert readiness["checks"]["embedding"]["ok"] is False
