import time

import httpx
import pytest
from django.test import override_settings

from memory_service.redis import get_redis
from tests.factories import make_tenant, make_token


def _clear_counters():
    redis = get_redis()
    for key in redis.scan_iter("memory-service:ratelimit:*"):
        redis.delete(key)


@pytest.mark.django_db
@override_settings(RATE_LIMIT_PER_MINUTE=3)
def test_it_answers_429_with_retry_after_over_the_rest_limit(api_client, other_client):
    _clear_counters()
    statuses = [api_client.get("/api/v1/memories").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = api_client.get("/api/v1/memories")
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert other_client.get("/api/v1/memories").status_code == 200  # counted per token


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_limits_mcp_and_rest_together(live_server_url):
    _clear_counters()
    raw = make_token(make_tenant("limited"), permissions=["memory:read"]).raw
    prefix = raw.split(".")[0]
    # Fill the token's window as the running server counts it (600 per minute by default).
    get_redis().incrby(f"memory-service:ratelimit:{prefix}:{int(time.time() // 60)}", 600)
    headers = {"Authorization": f"Bearer {raw}", "Accept": "application/json, text/event-stream"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp = httpx.post(f"{live_server_url}/mcp/", json=body, headers=headers)
    rest = httpx.get(f"{live_server_url}/api/v1/memories", headers=headers)
    assert mcp.status_code == 429 and "Retry-After" in mcp.headers
    assert rest.status_code == 429 and rest.json()["error"]["code"] == "rate_limited"
