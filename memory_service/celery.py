"""The Celery application. Workers and beat start with ``celery -A memory_service``."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")

app = Celery("memory_service")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _announce_ready(**kwargs):
    from memory_service.workers import worker_heartbeat_record

    worker_heartbeat_record()
