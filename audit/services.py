"""The only way to write an audit event."""

import hashlib
import hmac
from collections.abc import Iterable

from django.conf import settings
from django.db import router, transaction
from django.utils import timezone

from audit.chain import GENESIS, canonical, link
from audit.models import Action, AuditEvent
from tenants.context import query_with_settings, set_current_tenant
from tenants.models import Tenant


def user_pseudonym(user: str) -> str:
    """A keyed pseudonym for a user id, so the audit never holds the id and erasure rewrites nothing."""
    if not user:
        return ""
    digest = hmac.new(settings.AUDIT_HMAC_KEY.encode(), f"user|{user}".encode(), hashlib.sha256).hexdigest()
    return f"u_{digest[:16]}"


def audit_event_record(
    *,
    tenant: Tenant,
    actor: str,
    action: Action | str,
    resource_type: str,
    resource_ids: Iterable[str] = (),
    details: dict | None = None,
) -> AuditEvent:
    """Append one event to ``tenant``'s chain, in the caller's transaction (bound to ``tenant``).

    Writers of one tenant serialise on a transaction-level advisory lock, so the chain never
    forks or skips. ``details`` must hold ids, sizes and counts only — never text or PII.
    """
    action = Action(action)
    using = router.db_for_write(AuditEvent)
    # No savepoint: an event that cannot be written fails the caller's transaction with it.
    with transaction.atomic(using=using, savepoint=False):
        # One round trip: bind the tenant, take the tenant's chain lock, read the chain's head
        # (each statement sees what the one before it waited for).
        previous, head = query_with_settings(
            {"app.tenant_id": str(tenant.id)},
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 7));"
            " SELECT seq, hash FROM audit_auditevent WHERE tenant_id = %s ORDER BY seq DESC LIMIT 1",
            [f"audit:{tenant.id}", tenant.id],
            using=using,
        )
        seq = head[0][0] + 1 if head else 1
        prev_hash = head[0][1] if head else GENESIS
        event = AuditEvent(
            tenant_id=tenant.id,
            seq=seq,
            at=timezone.now(),
            actor=actor,
            action=action.value,
            resource_type=resource_type,
            resource_ids=[str(i) for i in resource_ids],
            details=details or {},
            prev_hash=prev_hash,
        )
        event.hash = link(
            payload=canonical(
                tenant_id=tenant.id,
                seq=seq,
                at=event.at,
                actor=event.actor,
                action=event.action,
                resource_type=event.resource_type,
                resource_ids=event.resource_ids,
                details=event.details,
            ),
            prev_hash=prev_hash,
        )
        event.save(force_insert=True, using=using)
        if previous["app.tenant_id"] != str(tenant.id):  # a caller bound to another tenant gets it back
            set_current_tenant(previous["app.tenant_id"], using=using)
    return event


def audit_read_record(
    *,
    principal,
    resource_type: str,
    resource_ids: Iterable = (),
    action: Action | str = Action.RETRIEVE,
    details: dict | None = None,
) -> AuditEvent:
    """Record that ``principal`` (``tenants.access.Principal``) was handed ``resource_ids`` of
    ``resource_type``: one event per read (for a list, the page's ids and their count), in the
    request's transaction. Ids and counts only, never content."""
    ids = [str(i) for i in resource_ids]
    return audit_event_record(
        tenant=principal.tenant, actor=principal.actor, action=action, resource_type=resource_type,
        resource_ids=ids, details={"count": len(ids)} | (details or {}),
    )  # fmt: skip
