"""Retention: what is deleted when its time is up, per tenant (settings as defaults; see Tenant).

- session memories past their expiry (``Tenant.session_ttl`` after their last write);
- export archives past theirs (``Tenant.export_retention`` after they were built);
- activity rows older than ``Tenant.activity_retention``.

Each purge that removed something is audited once per tenant (``purge``, counts only).
"""

from dataclasses import asdict, dataclass

from django.utils import timezone

from audit.models import Action
from audit.services import audit_event_record
from memory_service.exports.services import export_archives_expire
from memory_service.memories.removal import activity_purge, expired_session_memories_purge
from tenants.context import tenant_context
from tenants.models import Tenant

RETENTION_ACTOR = "system:retention"


@dataclass(frozen=True)
class PurgeCounts:
    session_memories: int
    embeddings: int
    supersessions: int
    archives: int
    activity: int

    def any(self) -> bool:
        return any(asdict(self).values())


def tenant_retention_purge(*, tenant: Tenant, actor: str = RETENTION_ACTOR) -> PurgeCounts:
    """Purge what ``tenant`` no longer keeps, in one transaction; audited when anything went."""
    now = timezone.now()
    with tenant_context(tenant.id):
        sessions = expired_session_memories_purge(tenant=tenant, now=now)
        counts = PurgeCounts(
            session_memories=sessions.memories,
            embeddings=sessions.embeddings,
            supersessions=sessions.supersessions,
            archives=export_archives_expire(tenant=tenant),
            activity=activity_purge(tenant=tenant, before=now - tenant.activity_retention),
        )
        if counts.any():
            audit_event_record(
                tenant=tenant, actor=actor, action=Action.PURGE, resource_type="tenant", resource_ids=[tenant.id],
                details={"counts": asdict(counts)},
            )  # fmt: skip
    return counts
