"""Checkpoints of the audit chains outside the database: signed, append-only, written by beat and by
``verify_audit``, and compared with every chain."""

import json
import time
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.checkpoints import (
    Checkpoint,
    CheckpointStore,
    FileCheckpointStore,
    checkpoint_sign,
    checkpoint_store,
    checkpoint_valid,
)
from audit.services import audit_checkpoints_write, audit_event_record
from audit.tasks import audit_checkpoint_task
from audit.verify import verify_tenant_audit
from tenants.context import platform_context, tenant_context
from tests.conftest import child_process_env, purge_queues, run_worker
from tests.factories import make_tenant, make_token

# Operators' commands read through the owner's connection: their data is written through it too.
operator = pytest.mark.django_db(databases=["default", "admin"])


def _sign(tenant_id, seq: int) -> Checkpoint:
    return checkpoint_sign(tenant_id=tenant_id, seq=seq, hash=f"{seq:064x}", at=timezone.now(), by="test")


def _record(tenant, count: int = 1) -> None:
    for n in range(count):
        audit_event_record(tenant=tenant, actor="system:test", action="purge", resource_type="memory",
                           details={"n": n})  # fmt: skip


def _verify(*args) -> str:
    out = StringIO()
    call_command("verify_audit", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _lines(store: FileCheckpointStore, tenant_id) -> list[dict]:
    path = store.directory / f"{tenant_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_it_appends_signed_checkpoints_as_json_lines_and_reads_the_latest(tmp_path):
    store, tenant_id, other_id = FileCheckpointStore(tmp_path), str(uuid.uuid4()), str(uuid.uuid4())
    first, second = _sign(tenant_id, 3), _sign(tenant_id, 7)
    store.append(first)
    store.append(second)
    store.append(_sign(other_id, 1))

    assert store.latest(tenant_id) == second and store.latest(str(uuid.uuid4())) is None
    assert store.tenant_ids() == sorted([tenant_id, other_id])
    assert [(line["seq"], line["hash"], line["by"]) for line in _lines(store, tenant_id)] == [
        (3, f"{3:064x}", "test"), (7, f"{7:064x}", "test"),
    ]  # fmt: skip
    assert set(_lines(store, tenant_id)[0]) == {"tenant", "seq", "hash", "at", "by", "sig"}
    assert checkpoint_valid(second, tenant_id=tenant_id)
    assert not checkpoint_valid(second, tenant_id=other_id)  # another tenant's, copied over


def test_it_never_validates_a_checkpoint_that_was_altered_or_signed_with_another_key(tmp_path, settings):
    store, tenant_id = FileCheckpointStore(tmp_path), str(uuid.uuid4())
    store.append(_sign(tenant_id, 9))
    path = store.directory / f"{tenant_id}.jsonl"
    path.write_text(path.read_text().replace('"seq":9', '"seq":4'))
    altered = store.latest(tenant_id)
    assert altered.seq == 4 and not checkpoint_valid(altered, tenant_id=tenant_id)

    real_key = settings.AUDIT_HMAC_KEY
    settings.AUDIT_HMAC_KEY = "not-the-service-key"
    forged = _sign(tenant_id, 4)
    settings.AUDIT_HMAC_KEY = real_key
    assert not checkpoint_valid(forged, tenant_id=tenant_id)


def test_it_skips_a_line_cut_short_and_starts_the_next_append_on_a_line_of_its_own(tmp_path):
    store, tenant_id = FileCheckpointStore(tmp_path), str(uuid.uuid4())
    first, torn, third = _sign(tenant_id, 1), _sign(tenant_id, 2), _sign(tenant_id, 3)
    store.append(first)
    path = store.directory / f"{tenant_id}.jsonl"
    with open(path, "a") as file:  # a crash in the middle of an append
        file.write(torn.to_json()[:40])
    assert store.latest(tenant_id) == first
    store.append(third)
    assert store.latest(tenant_id) == third
    assert path.read_text().splitlines() == [first.to_json(), torn.to_json()[:40], third.to_json()]


def test_it_reads_the_latest_checkpoint_from_the_end_whatever_the_block_boundaries(tmp_path):
    tenant_id = str(uuid.uuid4())
    written = [_sign(tenant_id, seq) for seq in range(1, 41)]
    for block in (1, 7, 64, 8192):
        store = FileCheckpointStore(tmp_path / str(block))
        store.BLOCK = block
        assert store.latest(tenant_id) is None
        for checkpoint in written:
            store.append(checkpoint)
        assert store.latest(tenant_id) == written[-1]
        assert list(store._lines_from_the_end(store._path(tenant_id))) == [
            c.to_json().encode() for c in reversed(written)
        ]


class MemoryCheckpointStore(CheckpointStore):
    """A store kept in this process: what ``AUDIT_CHECKPOINT_STORE`` may name instead of files."""

    kept: dict[str, list[Checkpoint]] = {}

    def append(self, checkpoint):
        self.kept.setdefault(checkpoint.tenant_id, []).append(checkpoint)

    def latest(self, tenant_id):
        return (self.kept.get(str(tenant_id)) or [None])[-1]

    def tenant_ids(self):
        return sorted(self.kept)


@operator
def test_it_uses_the_store_the_setting_names(settings, audit_checkpoint_dir):
    settings.AUDIT_CHECKPOINT_STORE = f"{__name__}.MemoryCheckpointStore"
    MemoryCheckpointStore.kept = {}
    with platform_context():
        tenant = make_tenant("elsewhere")
        _record(tenant, 2)
    assert isinstance(checkpoint_store(), MemoryCheckpointStore)
    assert "elsewhere: 2 events, chain intact" in _verify("--tenant", "elsewhere")
    assert [(c.seq, c.by) for c in MemoryCheckpointStore.kept[str(tenant.id)]] == [(2, "verify_audit")]
    assert not audit_checkpoint_dir.exists()


@pytest.mark.django_db
def test_it_checkpoints_every_chain_whose_head_moved_and_only_those():
    alpha, bravo, quiet = make_tenant("alpha"), make_tenant("bravo"), make_tenant("quiet")
    _record(alpha, 3)
    _record(bravo, 1)
    store = checkpoint_store()

    audit_checkpoints_write()
    assert [(c["seq"], c["by"]) for c in _lines(store, alpha.id)] == [(3, "schedule")]
    assert [c["seq"] for c in _lines(store, bravo.id)] == [1]
    assert _lines(store, quiet.id) == []  # no events, no checkpoint

    audit_checkpoints_write()  # nothing moved: nothing written
    _record(alpha, 2)
    audit_checkpoints_write()
    assert [c["seq"] for c in _lines(store, alpha.id)] == [3, 5]
    assert [c["seq"] for c in _lines(store, bravo.id)] == [1]
    assert checkpoint_valid(store.latest(alpha.id), tenant_id=alpha.id)
    with tenant_context(alpha.id):
        assert verify_tenant_audit(alpha.id, store=store).describe() == (
            "5 events, chain intact, checkpoint at #5 matches"
        )


@operator
def test_it_writes_the_head_each_verify_audit_run_verified():
    with platform_context():
        tenant = make_tenant("verified")
        make_token(tenant)  # token_created: event #1
        _record(tenant, 2)
    store = checkpoint_store()
    assert _verify("--tenant", "verified").startswith("verified: 3 events, chain intact\n")
    assert [(c["seq"], c["by"]) for c in _lines(store, tenant.id)] == [(3, "verify_audit")]
    with platform_context():
        _record(tenant)
    assert "verified: 4 events, chain intact, checkpoint at #3 matches" in _verify("--tenant", "verified")
    assert [c["seq"] for c in _lines(store, tenant.id)] == [3, 4]
    assert store.latest(tenant.id).hash == _lines(store, tenant.id)[-1]["hash"]


@operator
def test_it_reports_and_never_trusts_a_checkpoint_whose_signature_does_not_verify(settings):
    with platform_context():
        tenant = make_tenant("forged")
        _record(tenant, 4)
        audit_checkpoints_write()
    store = checkpoint_store()
    real_key = settings.AUDIT_HMAC_KEY
    settings.AUDIT_HMAC_KEY = "an-attackers-guess"
    store.append(_sign(tenant.id, 2))  # would hide the loss of events #3 and #4 if it were trusted
    settings.AUDIT_HMAC_KEY = real_key

    out = StringIO()
    with pytest.raises(CommandError, match="1 of 1 audit chains are broken"):
        call_command("verify_audit", "--tenant", "forged", stdout=out, stderr=StringIO())
    assert "forged: BROKEN at event #2: the latest checkpoint (#2, " in out.getvalue()
    assert "is not signed with the audit key for this tenant; it is not trusted" in out.getvalue()
    with platform_context():
        audit_checkpoints_write()
    assert (store.latest(tenant.id).seq, store.latest(tenant.id).by) == (2, "test")  # nobody wrote past it


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_checkpoints_through_the_beat_task_on_a_real_worker(django_db_blocker, tmp_path):
    tenant = make_tenant(f"beat-{uuid.uuid4().hex[:8]}")
    _record(tenant, 2)
    store = FileCheckpointStore(tmp_path / "worker-checkpoints")
    purge_queues()
    env = child_process_env(django_db_blocker) | {"AUDIT_CHECKPOINT_DIR": str(store.directory)}
    with run_worker(env, name="audit-checkpoints"):
        audit_checkpoint_task.delay()
        _wait_for(lambda: [c["seq"] for c in _lines(store, tenant.id)] == [2])
        _record(tenant)
        audit_checkpoint_task.delay()
        _wait_for(lambda: [c["seq"] for c in _lines(store, tenant.id)] == [2, 3])
    latest = store.latest(tenant.id)
    assert latest.by == "schedule" and checkpoint_valid(latest, tenant_id=tenant.id)


def _wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the worker did not write the checkpoint in time"
        time.sleep(0.1)
