"""Export work for Celery, on the ``exports`` queue: tasks receive ids only."""

from celery import Task, shared_task
from django.conf import settings

from memory_service.exports.services import export_job_fail, export_job_run, export_jobs_requeue_stale
from tenants.context import tenant_context
from tenants.selectors import tenant_active_ids, tenant_get


class ExportTask(Task):
    """Marks the job failed when a run raises (time limit included); the error class only."""

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        tenant_id, job_id = args
        export_job_fail(tenant_id=tenant_id, job_id=job_id, error=type(exc).__name__)


@shared_task(
    base=ExportTask,
    name="memory_service.exports.tasks.export_build_task",
    queue="exports",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=settings.EXPORT_SOFT_TIME_LIMIT,
    time_limit=settings.EXPORT_TIME_LIMIT,
)
def export_build_task(tenant_id: str, job_id: str) -> None:
    """Build one export. Idempotent: a redelivered message finds the job claimed or finished."""
    export_job_run(tenant_id=tenant_id, job_id=job_id)


@shared_task(name="memory_service.exports.tasks.export_requeue_stale_task", ignore_result=True)
def export_requeue_stale_task() -> int:
    """Queue again the exports whose worker died or whose message was lost, in every active tenant."""
    queued = 0
    for tenant_id in tenant_active_ids():
        with tenant_context(tenant_id):
            tenant = tenant_get(tenant_id=tenant_id)
        queued += export_jobs_requeue_stale(tenant=tenant)
    return queued
