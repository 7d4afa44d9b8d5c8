"""The audit trail: one event per action, append-only, tamper-evident, content-free, tenant-scoped."""

import os
import threading
from io import StringIO
from urllib.parse import urlparse, urlunparse

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from audit.models import AuditEvent
from audit.services import audit_event_record
from audit.verify import verify_tenant_chain
from tenants.context import platform_context, tenant_context
from tests.conftest import client_for
from tests.factories import make_tenant, make_token

CANARY = "CANARY-text-9d2e"


def _events(tenant, **filters):
    with tenant_context(tenant.id):
        return list(AuditEvent.objects.filter(**filters).order_by("seq"))


@pytest.mark.django_db
def test_it_records_exactly_one_event_per_action_with_the_right_fields(api_client, tenant):
    token = api_client.post("/api/v1/tokens", {"name": "second"}, format="json").json()
    write = lambda **f: api_client.post("/api/v1/memories", {"scope": "repository", "repository": "r1"} | f,  # noqa: E731
                                        format="json").json()  # fmt: skip
    first = write(text=f"first decision {CANARY}", kind="decision")
    second = write(text="second decision", kind="decision")
    api_client.patch(f"/api/v1/memories/{first['id']}", {"title": "t"}, format="json")
    api_client.post(f"/api/v1/memories/{first['id']}/supersede", {"by": second["id"]}, format="json")
    api_client.post(f"/api/v1/memories/{second['id']}/promote")
    api_client.post("/api/v1/search", {"query": f"decision {CANARY}", "repository": "r1"}, format="json")
    api_client.delete(f"/api/v1/memories/{first['id']}")
    api_client.post(f"/api/v1/tokens/{token['prefix']}/revoke")

    events = _events(tenant)
    by_action = {}
    for event in events:
        by_action.setdefault(event.action, []).append(event)
    assert {a: len(e) for a, e in by_action.items()} == {
        "token_created": 2, "offload": 2, "update": 1, "supersede": 1, "promote": 1, "retrieve": 1, "delete": 1,
        "token_revoked": 1,
    }  # fmt: skip
    assert by_action["supersede"][0].resource_ids == [first["id"], second["id"]]
    assert by_action["delete"][0].resource_ids == [first["id"]]
    assert set(by_action["retrieve"][0].resource_ids) == {first["id"], second["id"]}
    assert by_action["token_revoked"][0].resource_ids == [token["prefix"]]
    assert all(e.actor.startswith("token:") and e.actor.endswith(":agent") for e in by_action["offload"])
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert CANARY not in str([(e.details, e.resource_ids, e.actor) for e in events])
    assert verify_tenant_chain(tenant.id).ok


@pytest.mark.django_db
def test_it_refuses_update_delete_and_truncate_to_the_application_role(api_client, tenant):
    api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": "x"}, format="json")
    for sql in ("UPDATE audit_auditevent SET actor = 'forged'", "DELETE FROM audit_auditevent",
                "TRUNCATE audit_auditevent"):  # fmt: skip
        with pytest.raises(Exception, match="permission denied|append-only"), tenant_context(tenant.id):
            connection.cursor().execute(sql)


@pytest.mark.django_db(databases=["default", "admin"])
def test_it_refuses_update_and_delete_to_the_owner_role_too():
    with platform_context():
        tenant = make_tenant("owned")
        audit_event_record(tenant=tenant, actor="system:test", action="purge", resource_type="memory")
    for sql in ("UPDATE audit_auditevent SET actor = 'forged'", "DELETE FROM audit_auditevent"):
        with pytest.raises(Exception, match="append-only"), platform_context(), connections["admin"].cursor() as cursor:
            cursor.execute(sql)


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_detects_a_superuser_rewriting_history():
    tenant = make_tenant("tampered")
    for n in range(3):
        audit_event_record(tenant=tenant, actor="system:test", action="purge", resource_type="memory",
                           details={"count": n})  # fmt: skip
    assert "chain intact" in _verify("tampered")

    url = urlparse(os.environ["TEST_SUPERUSER_DATABASE_URL"])
    url = urlunparse(url._replace(path="/" + connections["default"].settings_dict["NAME"]))
    with psycopg.connect(url, autocommit=True) as superuser:
        superuser.execute("SET session_replication_role = replica")  # superusers can skip triggers
        superuser.execute(
            "UPDATE audit_auditevent SET details = '{\"count\": 99}' WHERE tenant_id = %s AND seq = 2", [tenant.id]
        )
    with pytest.raises(CommandError, match="1 of 1 audit chains are broken"):
        _verify("tampered")
    with tenant_context(tenant.id):
        assert verify_tenant_chain(tenant.id).broken_seq == 2


def _verify(slug) -> str:
    out = StringIO()
    call_command("verify_audit", "--tenant", slug, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_keeps_one_unbroken_chain_under_eight_concurrent_writers():
    tenant = make_tenant("busy")
    errors = []

    def writer(n):
        try:
            for i in range(10):
                with tenant_context(tenant.id):
                    audit_event_record(tenant=tenant, actor=f"system:w{n}", action="offload",
                                       resource_type="memory", details={"i": i})  # fmt: skip
        except Exception as exc:  # reported below; a thread's exception would be lost otherwise
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    events = _events(tenant)
    assert [e.seq for e in events] == list(range(1, 81))
    assert verify_tenant_chain(tenant.id).ok


@pytest.mark.django_db
def test_it_serves_the_audit_to_admin_tokens_of_the_tenant_only(api_client, other_client, tenant):
    memory = api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": "audited"}, format="json")
    listed = api_client.get("/api/v1/audit", {"action": "offload"}).json()
    assert [e["resource_ids"] for e in listed["results"]] == [[memory.json()["id"]]]
    assert set(listed["results"][0]) == {
        "id",
        "seq",
        "at",
        "actor",
        "action",
        "resource_type",
        "resource_ids",
        "details",
    }
    by_resource = api_client.get("/api/v1/audit", {"resource_id": memory.json()["id"]}).json()["results"]
    assert [e["action"] for e in by_resource] == ["offload"]
    assert other_client.get("/api/v1/audit", {"action": "offload"}).json()["results"] == []
    writer = client_for(make_token(tenant).raw)
    assert writer.get("/api/v1/audit").status_code == 403
    page = api_client.get("/api/v1/audit", {"limit": 1}).json()
    assert len(page["results"]) == 1 and page["next"]
    assert api_client.get("/api/v1/audit", {"action": "bogus"}).status_code == 400
