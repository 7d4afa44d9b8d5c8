"""Worker liveness: workers record a heartbeat in Redis; readiness reads its age."""

import time

from celery import shared_task

from memory_service.redis import get_redis

HEARTBEAT_KEY = "memory-service:worker-heartbeat"


def worker_heartbeat_record() -> float:
    """Record that a worker is alive now; returns the timestamp written."""
    now = time.time()
    get_redis().set(HEARTBEAT_KEY, repr(now), ex=3600)
    return now


def worker_heartbeat_age() -> float | None:
    """Seconds since the last worker heartbeat, or None if none was ever recorded."""
    value = get_redis().get(HEARTBEAT_KEY)
    if value is None:
        return None
    return max(0.0, time.time() - float(value))


@shared_task(name="memory_service.workers.record_worker_heartbeat")
def record_worker_heartbeat() -> float:
    """Scheduled by beat: proves a worker takes tasks from the broker; readiness reads it."""
    return worker_heartbeat_record()
