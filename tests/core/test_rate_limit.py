import time

import httpx
import pytest
from django.test import override_settings

from memory_service.ratelimit import WINDOW_SECONDS
from memory_service.redis import get_redis
from memory_service.settings import base
from tests.factories import make_tenant, make_token

ATTACKER = "203.0.113.9"


def _clear_counters():
    redis = get_redis()
    for pattern in ("memory-service:ratelimit:*", "memory-service:authfail:*"):
        for key in redis.scan_iter(pattern):
            redis.delete(key)


def _wait_for_a_fresh_window(margin: float = 10.0) -> None:
    """The limits count in fixed one-minute windows: requests sent across a window's end would
    start counting again. Start a test with at least ``margin`` seconds of its window left."""
    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < margin:
        time.sleep(left + 0.05)


@pytest.fixture(autouse=True)
def clear_counters():
    _clear_counters()
    _wait_for_a_fresh_window()
    yield
    _clear_counters()


@pytest.mark.django_db
@override_settings(RATE_LIMIT_PER_MINUTE=3)
def test_it_answers_429_with_retry_after_over_the_rest_limit(api_client, other_client):
    statuses = [api_client.get("/api/v1/memories").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = api_client.get("/api/v1/memories")
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert other_client.get("/api/v1/memories").status_code == 200  # counted per token


@pytest.mark.django_db
@override_settings(RATE_LIMIT_PER_MINUTE=3, AUTH_FAILURES_PER_MINUTE=5)
def test_it_never_limits_a_token_for_failed_authentications_naming_its_prefix(api_client, token, anonymous_client):
    forged = f"Bearer {token.split('.')[0]}.not-the-secret"
    statuses = [
        anonymous_client.get("/api/v1/memories", HTTP_AUTHORIZATION=forged, REMOTE_ADDR=ATTACKER).status_code
        for _ in range(20)
    ]
    assert statuses == [401] * 5 + [429] * 15
    assert api_client.get("/api/v1/memories").status_code == 200
    # Not even from the attacker's own address: a valid token is never refused for failures.
    assert api_client.get("/api/v1/memories", REMOTE_ADDR=ATTACKER).status_code == 200


@pytest.mark.django_db
@override_settings(AUTH_FAILURES_PER_MINUTE=5)
def test_it_answers_429_to_an_address_that_fails_authentication_too_often(anonymous_client):
    bad = {"HTTP_AUTHORIZATION": "Bearer Abcd1234.wrong", "REMOTE_ADDR": ATTACKER}
    statuses = [anonymous_client.get("/api/v1/memories", **bad).status_code for _ in range(6)]
    assert statuses == [401] * 5 + [429]
    limited = anonymous_client.get("/api/v1/memories", **bad)
    assert limited.json()["error"]["code"] == "rate_limited" and 1 <= int(limited["Retry-After"]) <= 60
    assert ATTACKER not in limited.content.decode()
    elsewhere = anonymous_client.get("/api/v1/memories", HTTP_AUTHORIZATION="Bearer Abcd1234.wrong")
    assert elsewhere.status_code == 401  # another address is counted on its own


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_limits_mcp_and_rest_together(live_server_url):
    raw = make_token(make_tenant("limited"), permissions=["memory:read"]).raw
    prefix = raw.split(".")[0]
    # Fill the token's window as the running server counts it (its settings' default limit).
    get_redis().incrby(f"memory-service:ratelimit:{prefix}:{int(time.time() // 60)}", base.RATE_LIMIT_PER_MINUTE)
    headers = MCP_HEADERS | {"Authorization": f"Bearer {raw}"}
    mcp = httpx.post(f"{live_server_url}/mcp/", json=MCP_LIST, headers=headers)
    rest = httpx.get(f"{live_server_url}/api/v1/memories", headers=headers)
    assert mcp.status_code == 429 and "Retry-After" in mcp.headers
    assert rest.status_code == 429 and rest.json()["error"]["code"] == "rate_limited"


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_failed_mcp_and_rest_authentications_limit_their_address_but_never_the_token(live_server_url):
    raw = make_token(make_tenant("targeted"), permissions=["memory:read"]).raw
    forged = MCP_HEADERS | {"Authorization": f"Bearer {raw.split('.')[0]}.not-the-secret"}
    # The running server allows 30 failures per address per minute; REST and MCP count together.
    statuses = [httpx.post(f"{live_server_url}/mcp/", json=MCP_LIST, headers=forged).status_code for _ in range(20)]
    statuses += [httpx.get(f"{live_server_url}/api/v1/memories", headers=forged).status_code for _ in range(12)]
    assert statuses == [401] * 30 + [429] * 2
    limited = httpx.post(f"{live_server_url}/mcp/", json=MCP_LIST, headers=forged)
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"

    real = MCP_HEADERS | {"Authorization": f"Bearer {raw}"}
    assert httpx.post(f"{live_server_url}/mcp/", json=MCP_LIST, headers=real).status_code == 200
    assert httpx.get(f"{live_server_url}/api/v1/memories", headers=real).status_code == 200
