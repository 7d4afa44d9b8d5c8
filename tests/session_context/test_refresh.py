"""The stored session context: served, refreshed after writes, and coalesced under a burst."""

import time

import pytest
from django.test import override_settings

from memory_service.redis import get_redis
from memory_service.session_context.models import SessionContext
from memory_service.session_context.services import refresh_coalesced, request_refresh
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.factories import make_tenant, make_token


def _stored(tenant, user="u1", repository="r1") -> SessionContext:
    with tenant_context(tenant.id):
        return SessionContext.objects.get(user=user, repository=repository)


@pytest.mark.django_db
@override_settings(SESSION_CONTEXT_DEBOUNCE_SECONDS=0)
def test_it_stores_the_digest_and_refreshes_it_after_a_write(api_client, tenant, django_capture_on_commit_callbacks):
    first = api_client.get("/api/v1/context", {"user": "u1", "repository": "r1"}).content.decode()
    assert "Adopt Renovate" not in first and _stored(tenant).generation == 1
    with django_capture_on_commit_callbacks(execute=True):
        decision = {"scope": "repository", "repository": "r1", "kind": "decision", "text": "Adopt Renovate for updates"}
        api_client.post("/api/v1/memories", decision, format="json")
    key = f"memory-service:context:{tenant.id}:u1:r1"
    assert get_redis().exists(f"{key}:dirty") and get_redis().exists(f"{key}:queued")
    assert refresh_coalesced(tenant_id=str(tenant.id), user="u1", repository="r1") == 1
    served = api_client.get("/api/v1/context", {"user": "u1", "repository": "r1"}).content.decode()
    assert "Adopt Renovate for updates" in served and _stored(tenant).generation == 2
    assert refresh_coalesced(tenant_id=str(tenant.id), user="u1", repository="r1") == 0  # nothing dirty


@pytest.mark.django_db
@override_settings(SESSION_CONTEXT_DEBOUNCE_SECONDS=0)
def test_it_leaves_the_render_to_the_lock_holder_and_never_drops_the_last_write(tenant, api_client):
    api_client.get("/api/v1/context", {"user": "u1", "repository": "r1"})
    key = f"memory-service:context:{tenant.id}:u1:r1"
    redis = get_redis()
    lock = redis.lock(f"{key}:lock", timeout=30)
    assert lock.acquire(blocking=False)
    request_refresh(tenant_id=tenant.id, user="u1", repository="r1")
    # Another run holds the lock: this one leaves the render to it...
    assert refresh_coalesced(tenant_id=str(tenant.id), user="u1", repository="r1") == 0
    assert redis.exists(f"{key}:dirty")  # ...and the write stays marked for it.
    lock.release()
    assert refresh_coalesced(tenant_id=str(tenant.id), user="u1", repository="r1") == 1
    assert not redis.exists(f"{key}:dirty")


@pytest.mark.django_db
@override_settings(SESSION_CONTEXT_DEBOUNCE_SECONDS=30)
def test_it_waits_while_writes_keep_coming(tenant, api_client):
    api_client.get("/api/v1/context", {"user": "u1", "repository": "r1"})
    request_refresh(tenant_id=tenant.id, user="u1", repository="r1")
    assert refresh_coalesced(tenant_id=str(tenant.id), user="u1", repository="r1") == 0
    assert _stored(tenant).generation == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
@override_settings(SESSION_CONTEXT_DEBOUNCE_SECONDS=4.0)
def test_it_coalesces_a_burst_of_100_writes_into_at_most_two_renders(celery_worker_process):
    tenant = make_tenant("bursty")
    client = client_for(make_token(tenant).raw)
    assert client.get("/api/v1/context", {"user": "u1", "repository": "r1"}).status_code == 200
    before = _stored(tenant).generation
    for i in range(100):
        response = client.post("/api/v1/memories", {"scope": "repository", "repository": "r1", "kind": "lesson",
                                                     "text": f"Burst lesson number {i}"}, format="json")  # fmt: skip
        assert response.status_code == 201
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        context = _stored(tenant)
        if "Burst lesson number 99" in context.markdown:
            break
        time.sleep(0.25)
    time.sleep(5)  # let any straggling run finish before counting
    context = _stored(tenant)
    assert "Burst lesson number 99" in context.markdown
    assert 1 <= context.generation - before <= 2


def test_it_fails_open_when_redis_is_unreachable(settings):
    from memory_service.redis import get_redis as cached

    cached.cache_clear()
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    try:
        assert request_refresh(tenant_id="00000000-0000-0000-0000-000000000000", user="u", repository="r") is False
    finally:
        cached.cache_clear()
