"""Requests per token per minute, counted in Redis, shared by REST and MCP. Fails open."""

import time

import redis
from django.conf import settings

from memory_service.redis import get_redis


def token_prefix_from_header(authorization: str) -> str | None:
    """The lookup prefix of a bearer token (the part before the dot), without validating it."""
    scheme, _, raw = authorization.partition(" ")
    if scheme.lower() != "bearer" or "." not in raw:
        return None
    prefix = raw.strip().split(".", 1)[0]
    return prefix if prefix.isalnum() and len(prefix) <= 16 else None


def rate_limit_retry_after(prefix: str) -> int | None:
    """None if the token may go on; else seconds until its window resets.

    A fixed one-minute window of RATE_LIMIT_PER_MINUTE requests (0 disables). If Redis is down the
    request goes through: a limit must never make the service unavailable.
    """
    limit = settings.RATE_LIMIT_PER_MINUTE
    if limit <= 0:
        return None
    now = time.time()
    key = f"memory-service:ratelimit:{prefix}:{int(now // 60)}"
    try:
        pipe = get_redis().pipeline()
        pipe.incr(key)
        pipe.expire(key, 61)
        count = pipe.execute()[0]
    except redis.RedisError:
        return None
    if count <= limit:
        return None
    return max(1, 60 - int(now % 60))
