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
from memory_service.exceptions import ValidationError
from memory_service.exports.services import export_archives_expire
from memory_service.memories.removal import activity_purge, expired_session_memories_purge
from tenants.context import tenant_context
from tenants.models import Tenant

RETENTION_ACTOR = "system:retention"
RETENTION_FIELDS = ("session_ttl_hours", "export_retention_hours", "activity_retention_days")


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


def tenant_retention_set(*, tenant: Tenant, **periods: int | None) -> Tenant:
    """Change a tenant's retention periods (``RETENTION_FIELDS``): a positive integer, or None to
    fall back to the setting of the same name. Fields not given are left as they are."""
    unknown = set(periods) - set(RETENTION_FIELDS)
    if unknown:
        raise ValidationError("Unknown retention field.", fields={name: ["Unknown field."] for name in unknown})
    for name, value in periods.items():
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValidationError(f"'{name}' must be a positive integer.", fields={name: ["A positive integer."]})
    with tenant_context(tenant.id):
        Tenant.objects.filter(id=tenant.id).update(**periods)
        tenant.refresh_from_db()
    return tenant
