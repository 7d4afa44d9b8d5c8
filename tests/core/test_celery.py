import pytest

from memory_service.redis import get_redis
from memory_service.workers import HEARTBEAT_KEY, record_worker_heartbeat


@pytest.mark.worker
def test_it_runs_a_task_through_a_real_worker_and_broker(celery_worker_process):
    get_redis().delete(HEARTBEAT_KEY)
    result = record_worker_heartbeat.delay()
    written = result.get(timeout=30)
    assert result.successful()
    assert float(get_redis().get(HEARTBEAT_KEY)) == written
    assert celery_worker_process.poll() is None
