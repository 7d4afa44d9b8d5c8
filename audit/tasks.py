"""Audit work for Celery, run by beat (``CELERY_BEAT_SCHEDULE``)."""

from celery import shared_task

from audit.services import audit_checkpoints_write


@shared_task(name="audit.tasks.audit_checkpoint_task", ignore_result=True)
def audit_checkpoint_task() -> int:
    """Checkpoint, outside the database, the head of every audit chain that moved since its last
    checkpoint; returns how many were written."""
    return audit_checkpoints_write()
