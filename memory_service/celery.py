"""The Celery application. Workers and beat start with ``celery -A memory_service``."""

import os

from celery import Celery
from celery.signals import task_postrun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")

app = Celery("memory_service")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup would close each worker process's connection pool around every task, so
# every task would open new database connections. Pools are per process (made after the fork), so
# they are kept; the task's connections go back to the pool after it (below) and are checked by
# the pool before their next use.
app.conf.CELERY_DB_REUSE_MAX = 10**9
app.autodiscover_tasks()


@task_postrun.connect
def _return_connections(**kwargs):
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


@worker_ready.connect
def _announce_ready(**kwargs):
    from memory_service.workers import worker_heartbeat_record

    worker_heartbeat_record()
