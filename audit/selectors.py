"""Reads of the audit trail."""

import uuid

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.models import QuerySet

from audit.models import AuditEvent
from tenants.access import Principal, require_unbound


def audit_tenant_ids() -> list:
    """Ids of the tenants that have audit events, as far as the caller's context shows."""
    return list(AuditEvent.objects.values_list("tenant_id", flat=True).distinct())


def audit_chain_tenant_ids() -> list[str]:
    """Ids of every tenant that has audit events, whatever the caller's context shows: for jobs
    that visit each chain (a function that may look past RLS; it reveals nothing else)."""
    with connections[router.db_for_read(AuditEvent) or DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT app_audit_tenant_ids()")
        return [str(row[0]) for row in cursor.fetchall()]


def audit_chain_head(*, tenant_id: uuid.UUID | str) -> tuple[int, str] | None:
    """(seq, hash) of the tenant's newest event, or None when it has none (read under RLS)."""
    return AuditEvent.objects.filter(tenant_id=tenant_id).order_by("-seq").values_list("seq", "hash").first()


def audit_event_hash(*, tenant_id: uuid.UUID | str, seq: int) -> str | None:
    """The link of the tenant's event number ``seq``, or None when there is no such event."""
    return AuditEvent.objects.filter(tenant_id=tenant_id, seq=seq).values_list("hash", flat=True).first()


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
