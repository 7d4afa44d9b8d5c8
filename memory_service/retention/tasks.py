"""The retention purge, run by beat (``CELERY_BEAT_SCHEDULE``)."""

from celery import shared_task

from memory_service.retention.services import tenant_retention_purge
from tenants.context import tenant_context
from tenants.selectors import tenant_active_ids, tenant_get


@shared_task(name="memory_service.retention.tasks.retention_purge_task", ignore_result=True)
def retention_purge_task() -> int:
    """Purge expired session memories, export archives and old activity rows in every active
    tenant; returns how many tenants had something purged."""
    purged = 0
    for tenant_id in tenant_active_ids():
        with tenant_context(tenant_id):
            tenant = tenant_get(tenant_id=tenant_id)
        purged += tenant_retention_purge(tenant=tenant).any()
    return purged
