"""Verification of the audit chains: recompute every link, compare the head with the latest
checkpoint kept outside the database, and report the first thing that is wrong."""

from dataclasses import dataclass
from datetime import UTC

from audit.chain import GENESIS, canonical, link
from audit.checkpoints import Checkpoint, CheckpointStore, checkpoint_valid
from audit.models import AuditEvent


@dataclass(frozen=True)
class ChainReport:
    tenant_id: str
    events: int
    broken_seq: int | None = None  # the first event whose link does not verify (or that is missing)
    reason: str = ""
    head_hash: str = GENESIS  # the link of the last event walked
    checkpoint: Checkpoint | None = None  # the checkpoint the chain was compared with

    @property
    def ok(self) -> bool:
        return self.broken_seq is None

    def describe(self) -> str:
        """One line for operators: how many events and what matched, or where it broke and why."""
        if not self.ok:
            return f"BROKEN at event #{self.broken_seq}: {self.reason}"
        if self.checkpoint is None:
            return f"{self.events} events, chain intact"
        return f"{self.events} events, chain intact, checkpoint at #{self.checkpoint.seq} matches"


def _walk(tenant_id, *, queryset, watch_seq: int | None) -> tuple[ChainReport, str | None]:
    """Walk one tenant's events by ``seq``; also return the link of event ``watch_seq`` if walked."""
    events = (queryset if queryset is not None else AuditEvent.objects).filter(tenant_id=tenant_id).order_by("seq")
    previous = GENESIS
    watched = None
    count = 0
    for expected_seq, event in enumerate(events.iterator(chunk_size=2000), start=1):
        count += 1
        if event.seq != expected_seq:
            return ChainReport(str(tenant_id), count, expected_seq, f"event #{expected_seq} is missing"), watched
        if event.prev_hash != previous:
            return ChainReport(str(tenant_id), count, event.seq, "does not link to the event before it"), watched
        payload = canonical(
            tenant_id=event.tenant_id, seq=event.seq, at=event.at, actor=event.actor, action=event.action,
            resource_type=event.resource_type, resource_ids=event.resource_ids, details=event.details,
        )  # fmt: skip
        if link(payload=payload, prev_hash=previous) != event.hash:
            return ChainReport(str(tenant_id), count, event.seq, "its content does not match its link"), watched
        previous = event.hash
        if event.seq == watch_seq:
            watched = event.hash
    return ChainReport(str(tenant_id), count, head_hash=previous), watched


def verify_tenant_chain(tenant_id, *, queryset=None) -> ChainReport:
    """Walk one tenant's events by ``seq``: no gaps, each ``prev_hash`` is the previous link, each
    ``hash`` recomputes from the event's own fields with the secret key. Says nothing about
    events removed from the end of the chain: ``verify_tenant_audit`` does."""
    return _walk(tenant_id, queryset=queryset, watch_seq=None)[0]


def verify_tenant_audit(tenant_id, *, store: CheckpointStore, queryset=None) -> ChainReport:
    """``verify_tenant_chain``, then the chain compared with the tenant's latest checkpoint in ``store``.

    Broken, besides a broken link: a latest checkpoint that is not validly signed for this tenant
    (reported, never trusted); a chain that ends before the checkpointed event (its tail, or the
    whole chain, was deleted); a checkpointed event whose link differs (the chain up to it was
    replaced). Events newer than the latest checkpoint are checked by their links only."""
    checkpoint = store.latest(tenant_id)
    chain, watched = _walk(tenant_id, queryset=queryset, watch_seq=checkpoint.seq if checkpoint else None)
    if not chain.ok or checkpoint is None:
        return chain
    compared = ChainReport(str(tenant_id), chain.events, head_hash=chain.head_hash, checkpoint=checkpoint)
    when = f"{checkpoint.at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    if not checkpoint_valid(checkpoint, tenant_id=tenant_id):
        return _broken(compared, checkpoint.seq, f"the latest checkpoint (#{checkpoint.seq}, {when}) is not signed "
                       "with the audit key for this tenant; it is not trusted")  # fmt: skip
    if chain.events < checkpoint.seq:
        ends = f"ends at #{chain.events}" if chain.events else "has no events"
        return _broken(compared, chain.events + 1, f"events #{chain.events + 1} to #{checkpoint.seq} are missing: the "
                       f"chain {ends} but was checkpointed at #{checkpoint.seq} ({when})")  # fmt: skip
    if watched != checkpoint.hash:
        return _broken(compared, checkpoint.seq, f"its link differs from the checkpoint of {when}: the chain up to "
                       "it was replaced")  # fmt: skip
    return compared


def _broken(report: ChainReport, seq: int, reason: str) -> ChainReport:
    return ChainReport(report.tenant_id, report.events, seq, reason, report.head_hash, report.checkpoint)
