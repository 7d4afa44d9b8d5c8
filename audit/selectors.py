"""Reads of the audit trail."""

from django.db.models import QuerySet

from audit.models import AuditEvent
from tenants.access import Principal, require_unbound


def audit_tenant_ids() -> list:
    """Ids of the tenants that have audit events, as far as the caller's context shows."""
    return list(AuditEvent.objects.values_list("tenant_id", flat=True).distinct())


def audit_event_list(*, principal: Principal, filters: dict) -> QuerySet[AuditEvent]:
    """The tenant's events, newest first, narrowed by action, actor, resource type or id, and time.

    The audit spans every user and repository: a bound principal is refused (403)."""
    require_unbound(principal, "The audit")
    events = AuditEvent.objects.for_tenant(principal.tenant)
    if filters.get("action"):
        events = events.filter(action=filters["action"])
    if filters.get("actor"):
        events = events.filter(actor__startswith=filters["actor"])
    if filters.get("resource_type"):
        events = events.filter(resource_type=filters["resource_type"])
    if filters.get("resource_id"):
        events = events.filter(resource_ids__contains=[filters["resource_id"]])
    if filters.get("since"):
        events = events.filter(at__gte=filters["since"])
    if filters.get("until"):
        events = events.filter(at__lt=filters["until"])
    return events.order_by("-at", "-id")
