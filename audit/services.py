"""The only way to write an audit event, and the writing of checkpoints of the chains."""

import hashlib
import hmac
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import router, transaction
from django.utils import timezone

from audit.chain import GENESIS, canonical, link
from audit.checkpoints import Checkpoint, CheckpointStore, checkpoint_sign, checkpoint_store, checkpoint_valid
from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_head, audit_chain_tenant_ids, audit_event_hash
from tenants.access import Principal
from tenants.context import query_with_settings, set_current_tenant, tenant_context
from tenants.models import Tenant

logger = logging.getLogger(__name__)

# What an event may name a resource by; it is stored as text.
ResourceId = str | uuid.UUID | int


def user_pseudonym(user: str) -> str:
    """A keyed pseudonym for a user id, so the audit never holds the id and erasure rewrites nothing."""
    if not user:
        return ""
    digest = hmac.new(settings.AUDIT_HMAC_KEY.encode(), f"user|{user}".encode(), hashlib.sha256).hexdigest()
    return f"u_{digest[:16]}"


@dataclass(frozen=True)
class EventSpec:
    """One event to append: what happened, to which resources, with ids, sizes and counts only."""

    action: Action | str
    resource_type: str
    resource_ids: Iterable[ResourceId] = ()
    details: dict | None = None


def audit_event_record(
    *,
    tenant: Tenant,
    actor: str,
    action: Action | str,
    resource_type: str,
    resource_ids: Iterable[ResourceId] = (),
    details: dict | None = None,
) -> AuditEvent:
    """Append one event to ``tenant``'s chain, in the caller's transaction (bound to ``tenant``).

    Writers of one tenant serialise on a transaction-level advisory lock, so the chain never
    forks or skips. ``details`` must hold ids, sizes and counts only — never text or PII.
    """
    spec = EventSpec(action=action, resource_type=resource_type, resource_ids=resource_ids, details=details)
    return audit_events_record(tenant=tenant, actor=actor, events=[spec])[0]


def audit_events_record(*, tenant: Tenant, actor: str, events: list[EventSpec]) -> list[AuditEvent]:
    """Append ``events`` to ``tenant``'s chain, in order, by ``actor``, in the caller's transaction:
    one lock, one read of the chain's head and one insert for all of them (a bulk write's items).

    Same promises as ``audit_event_record``.
    """
    actions = [Action(spec.action) for spec in events]
    if not events:
        return []
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
        seq = head[0][0] if head else 0
        prev_hash = head[0][1] if head else GENESIS
        at = timezone.now()
        written = []
        for spec, action in zip(events, actions, strict=True):
            seq += 1
            event = AuditEvent(
                tenant_id=tenant.id,
                seq=seq,
                at=at,
                actor=actor,
                action=action.value,
                resource_type=spec.resource_type,
                resource_ids=[str(i) for i in spec.resource_ids],
                details=spec.details or {},
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
            prev_hash = event.hash
            written.append(event)
        AuditEvent.objects.using(using).bulk_create(written)
        if previous["app.tenant_id"] != str(tenant.id):  # a caller bound to another tenant gets it back
            set_current_tenant(previous["app.tenant_id"], using=using)
    return written


def audit_read_record(
    *,
    principal: Principal,
    resource_type: str,
    resource_ids: Iterable[ResourceId] = (),
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


def audit_checkpoint_write(
    *, tenant_id: uuid.UUID | str, seq: int, hash: str, by: str, store: CheckpointStore
) -> Checkpoint:
    """Sign the head (``seq``, ``hash``) of ``tenant_id``'s chain as of now and append it to ``store``.

    The caller vouches that this head extends the tenant's latest checkpoint (``verify_audit`` has
    just compared them; ``audit_checkpoint_advance`` checks it)."""
    checkpoint = checkpoint_sign(tenant_id=tenant_id, seq=seq, hash=hash, at=timezone.now(), by=by)
    store.append(checkpoint)
    return checkpoint


def audit_checkpoint_advance(
    *, tenant_id: uuid.UUID | str, store: CheckpointStore, by: str = "schedule"
) -> Checkpoint | None:
    """Checkpoint ``tenant_id``'s chain head if it moved past the latest checkpoint (or there is none);
    returns the checkpoint written, or None. Runs in a transaction bound to the tenant.

    Never checkpoints a chain that no longer holds the latest checkpoint — shorter than it, or with
    another link at its seq — nor past a checkpoint that is not validly signed: that would bless a
    deletion. Those are logged as errors and left for ``verify_audit`` to report."""
    head = audit_chain_head(tenant_id=tenant_id)
    if head is None:
        return None
    seq, head_hash = head
    latest = store.latest(tenant_id)
    if latest is not None:
        if not checkpoint_valid(latest, tenant_id=tenant_id):
            logger.error(
                "audit checkpoint not written: the latest one is not validly signed",
                extra={"tenant_id": str(tenant_id), "checkpoint_seq": latest.seq},
            )
            return None
        if seq == latest.seq and head_hash == latest.hash:
            return None
        if seq < latest.seq or audit_event_hash(tenant_id=tenant_id, seq=latest.seq) != latest.hash:
            logger.error(
                "audit checkpoint not written: the chain no longer holds its latest checkpoint",
                extra={"tenant_id": str(tenant_id), "checkpoint_seq": latest.seq, "head_seq": seq},
            )
            return None
    return audit_checkpoint_write(tenant_id=tenant_id, seq=seq, hash=head_hash, by=by, store=store)


def audit_checkpoints_write(*, store: CheckpointStore | None = None) -> int:
    """Checkpoint the head of every tenant's chain that moved (``audit_checkpoint_advance``), each
    read under its own tenant's RLS; returns how many checkpoints were written."""
    store = store if store is not None else checkpoint_store()
    written = 0
    for tenant_id in audit_chain_tenant_ids():
        with tenant_context(tenant_id):
            written += audit_checkpoint_advance(tenant_id=tenant_id, store=store) is not None
    return written
