"""One Redis client per process for locks, heartbeats and rate limits (Celery has its own)."""

from functools import cache

import redis
from django.conf import settings


@cache
def get_redis() -> redis.Redis:
    """A client with short timeouts: callers treat Redis as optional and fail open or report it."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5)
