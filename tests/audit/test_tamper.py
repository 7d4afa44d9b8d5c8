"""Tampering with the audit trail as whoever owns the database would, and what ``verify_audit`` says.

Each test works as the schema owner (``connections["admin"]``, role ``memory_owner``), switches off
the triggers that make ``audit_auditevent`` append-only (``audit/migrations/0001_initial.py``) the
way such an owner can, rewrites or deletes rows, and switches them on again, all inside the test's
transaction, which is rolled back afterwards. The chain's HMAC key and the checkpoints are out of
the owner's reach.
"""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import Client

from audit.checkpoints import checkpoint_store
from audit.services import audit_checkpoints_write, audit_event_record
from tenants.context import platform_context
from tenants.models import User
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(databases=["default", "admin"])

EVENTS = 5


@pytest.fixture
def victim():
    """A tenant with a chain of five varied events, checkpointed by the beat job at #5."""
    with platform_context():
        tenant = make_tenant("victim")
        for n in range(1, EVENTS + 1):
            _record(tenant, n)
        assert audit_checkpoints_write() >= 1
    assert checkpoint_store().latest(tenant.id).seq == EVENTS
    return tenant


def _record(tenant, n: int) -> None:
    with platform_context():
        audit_event_record(tenant=tenant, actor=f"token:abc{n}:agent", action="offload", resource_type="memory",
                           resource_ids=[f"m-{n}", f"m-{n}b"], details={"n": n, "bytes": 10 * n})  # fmt: skip


def _as_owner(sql: str, params: list) -> int:
    """Run ``sql`` as the database owner with the append-only triggers off; returns the rows it touched."""
    with connections["admin"].cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER ALL")
        cursor.execute(sql, params)
        touched = cursor.rowcount
        cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER ALL")
    return touched


def _verify(*args) -> tuple[str, CommandError | None]:
    """verify_audit's output, and the CommandError it ended with (None when every chain verified)."""
    out = StringIO()
    try:
        call_command("verify_audit", *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def _lines_about(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(f"{name}: ")]


def test_it_verifies_the_untouched_chain(victim):
    output, error = _verify("--tenant", "victim")
    assert error is None
    assert _lines_about(output, "victim") == ["victim: 5 events, chain intact, checkpoint at #5 matches"]


TAMPERED_COLUMNS = {
    "actor": "'admin:mallory'",
    "action": "'delete'",
    "resource_type": "'token'",
    "resource_ids": "ARRAY['m-forged']::varchar[]",
    "details": """'{"n": 3, "bytes": 31}'::jsonb""",
    "at": "at - interval '1 second'",
    "prev_hash": "repeat('0', 64)",
    "hash": "repeat('f', 64)",
}


@pytest.mark.parametrize("column", sorted(TAMPERED_COLUMNS))
def test_it_names_the_event_whose_column_was_changed(victim, column):
    touched = _as_owner(
        f"UPDATE audit_auditevent SET {column} = {TAMPERED_COLUMNS[column]} WHERE tenant_id = %s AND seq = 3",
        [victim.id],
    )
    assert touched == 1
    output, error = _verify("--tenant", "victim")
    reason = "does not link to the event before it" if column == "prev_hash" else "its content does not match its link"
    assert _lines_about(output, "victim") == [f"victim: BROKEN at event #3: {reason}"]
    assert str(error) == "1 of 1 audit chains are broken."


def test_it_names_an_event_deleted_from_the_middle(victim):
    assert _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq = 3", [victim.id]) == 1
    output, error = _verify("--tenant", "victim")
    assert _lines_about(output, "victim") == ["victim: BROKEN at event #3: event #3 is missing"]
    assert error is not None


def test_it_names_the_tail_deleted_after_a_checkpoint(victim):
    assert _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq > 3", [victim.id]) == 2
    output, error = _verify("--tenant", "victim")
    [line] = _lines_about(output, "victim")
    assert line.startswith(
        "victim: BROKEN at event #4: events #4 to #5 are missing: the chain ends at #3 but was checkpointed at #5 ("
    )
    assert str(error) == "1 of 1 audit chains are broken."


def test_it_names_a_whole_chain_deleted_after_a_checkpoint(victim):
    assert _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s", [victim.id]) == EVENTS
    output, error = _verify("--tenant", "victim")
    [line] = _lines_about(output, "victim")
    assert line.startswith(
        "victim: BROKEN at event #1: events #1 to #5 are missing: the chain has no events but was checkpointed at #5"
    )
    assert error is not None


def test_it_names_a_tenant_known_only_to_the_checkpoint_store(victim):
    """The chain and the tenant itself deleted: only the checkpoint remembers them."""
    assert _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s", [victim.id]) == EVENTS
    with connections["admin"].cursor() as cursor:
        cursor.execute("DELETE FROM tenants_tenant WHERE id = %s", [victim.id])
    output, error = _verify()  # every tenant: those with events and those with checkpoints
    [line] = _lines_about(output, str(victim.id))
    assert line.startswith(f"{victim.id}: BROKEN at event #1: events #1 to #5 are missing")
    assert error is not None


def test_it_names_a_tail_deleted_and_written_again_after_a_checkpoint(victim):
    """New events take the deleted events' numbers: the chain verifies, but not at the checkpoint."""
    assert _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq > 3", [victim.id]) == 2
    for n in (40, 50, 60):
        _record(victim, n)
    with platform_context():
        audit_checkpoints_write()  # the beat job must not bless the replaced chain
    assert checkpoint_store().latest(victim.id).seq == EVENTS
    output, error = _verify("--tenant", "victim")
    [line] = _lines_about(output, "victim")
    assert line.startswith("victim: BROKEN at event #5: its link differs from the checkpoint of ")
    assert error is not None


def test_it_writes_no_checkpoint_for_a_chain_that_did_not_verify(victim):
    store = checkpoint_store()
    before = store.latest(victim.id)
    _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq > 3", [victim.id])
    with platform_context():
        audit_checkpoints_write()
    assert store.latest(victim.id) == before
    _verify("--tenant", "victim")
    assert store.latest(victim.id) == before


def test_it_shows_the_same_verdict_in_the_admin(victim):
    _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq > 3", [victim.id])
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    response = client.get("/admin/audit/auditevent/verify/", follow=True)
    [message] = [str(m) for m in response.context["messages"] if str(m).startswith("victim: ")]
    assert message.startswith("victim: BROKEN at event #4: events #4 to #5 are missing")


def test_it_cannot_see_the_deletion_of_events_newer_than_the_last_checkpoint(victim):
    """The limit of checkpoints: events written after the last one can be deleted without a trace."""
    for n in (6, 7):
        _record(victim, n)
    assert _as_owner("DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq > %s", [victim.id, EVENTS]) == 2
    output, error = _verify("--tenant", "victim")
    assert error is None
    assert _lines_about(output, "victim") == ["victim: 5 events, chain intact, checkpoint at #5 matches"]
