from celery import shared_task

from memory_service.session_context.services import refresh_coalesced


@shared_task(name="memory_service.session_context.tasks.refresh_session_context", ignore_result=True)
def refresh_session_context(tenant_id: str, user: str, repository: str) -> int:
    """Re-render one session-context digest, coalescing concurrent requests (see services)."""
    return refresh_coalesced(tenant_id=tenant_id, user=user, repository=repository)
