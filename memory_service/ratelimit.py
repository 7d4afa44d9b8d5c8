"""Rate limits, counted in Redis in one-minute windows and shared by REST and MCP. Fail open.

Two counters, so that nobody can spend another client's allowance:

- requests of an authenticated token (``RATE_LIMIT_PER_MINUTE``), counted only once the token
  has been verified: naming a token's prefix with a wrong secret never counts against the token;
- failed authentications per client address (``AUTH_FAILURES_PER_MINUTE``): beyond the limit the
  address's failing requests get 429 instead of 401. A valid token is never refused because of
  failures, from its own address or any other.

The client address is the connection's (``REMOTE_ADDR``, ASGI ``client``): behind a reverse proxy
the server must be told to take it from the proxy's ``X-Forwarded-For`` (README, "Rate limits").
"""

import time

import redis
from django.conf import settings

from memory_service.redis import get_redis

WINDOW_SECONDS = 60


def _count(key: str, limit: int) -> int | None:
    """Count one more event under ``key`` in the current window; None while the count is within
    ``limit`` (0 disables), else seconds until the window resets. None if Redis is down: a limit
    must never make the service unavailable."""
    if limit <= 0:
        return None
    now = time.time()
    window_key = f"{key}:{int(now // WINDOW_SECONDS)}"
    try:
        pipe = get_redis().pipeline()
        pipe.incr(window_key)
        pipe.expire(window_key, WINDOW_SECONDS + 1)
        count = pipe.execute()[0]
    except redis.RedisError:
        return None
    if count <= limit:
        return None
    return max(1, WINDOW_SECONDS - int(now % WINDOW_SECONDS))


def token_request_retry_after(prefix: str) -> int | None:
    """Count a request of the verified token with this lookup prefix; None if it may go on, else
    seconds until its window resets."""
    return _count(f"memory-service:ratelimit:{prefix}", settings.RATE_LIMIT_PER_MINUTE)


def auth_failure_retry_after(address: str) -> int | None:
    """Count a failed authentication from ``address``; None while the address is within
    ``AUTH_FAILURES_PER_MINUTE`` (answer 401), else seconds until its window resets (answer 429)."""
    return _count(f"memory-service:authfail:{address}", settings.AUTH_FAILURES_PER_MINUTE)
