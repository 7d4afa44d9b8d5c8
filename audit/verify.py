"""Verification of the audit chains: recompute every link and report the first broken one."""

from dataclasses import dataclass

from audit.chain import GENESIS, canonical, link
from audit.models import AuditEvent


@dataclass(frozen=True)
class ChainReport:
    tenant_id: str
    events: int
    broken_seq: int | None = None  # the first event whose link does not verify
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_seq is None


def verify_tenant_chain(tenant_id, *, queryset=None) -> ChainReport:
    """Walk one tenant's events by ``seq``: no gaps, each ``prev_hash`` is the previous link, each
    ``hash`` recomputes from the event's own fields with the secret key."""
    events = (queryset if queryset is not None else AuditEvent.objects).filter(tenant_id=tenant_id).order_by("seq")
    previous = GENESIS
    count = 0
    for expected_seq, event in enumerate(events.iterator(chunk_size=2000), start=1):
        count += 1
        if event.seq != expected_seq:
            return ChainReport(str(tenant_id), count, expected_seq, f"event #{expected_seq} is missing")
        if event.prev_hash != previous:
            return ChainReport(str(tenant_id), count, event.seq, "does not link to the event before it")
        payload = canonical(
            tenant_id=event.tenant_id, seq=event.seq, at=event.at, actor=event.actor, action=event.action,
            resource_type=event.resource_type, resource_ids=event.resource_ids, details=event.details,
        )  # fmt: skip
        if link(payload=payload, prev_hash=previous) != event.hash:
            return ChainReport(str(tenant_id), count, event.seq, "its content does not match its link")
        previous = event.hash
    return ChainReport(str(tenant_id), count)
