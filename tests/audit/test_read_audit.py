"""Every read that hands memory content or metadata to a caller is one audit event with the ids it
returned (a list: the page's ids and their count), never the content: REST, MCP tools and
resources, and the admin's memory pages."""

import asyncio
import json

import pytest
from django.test import Client

from audit.models import AuditEvent
from memory_service.exports.services import export_job_start
from tenants.context import tenant_context
from tenants.models import User
from tests.conftest import ALL_PERMISSIONS, client_for
from tests.factories import make_tenant, make_token
from tests.mcp.helpers import call, mcp_client

SECRET_TEXT = "the staging cluster is rebuilt on Fridays"


def _events(tenant) -> list[AuditEvent]:
    with tenant_context(tenant.id):
        return list(AuditEvent.objects.for_tenant(tenant).order_by("seq"))


def _write(client, **body) -> dict:
    response = client.post("/api/v1/memories", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _one_new_read(tenant, before: int, *, action: str = "retrieve") -> AuditEvent:
    """The one event a read added since ``before`` events: of ``action``, holding no content."""
    events = _events(tenant)[before:]
    assert [e.action for e in events] == [action], [(e.action, e.resource_type) for e in events]
    event = events[0]
    recorded = json.dumps([event.actor, event.resource_type, event.resource_ids, event.details])
    assert SECRET_TEXT not in recorded and "staging" not in recorded
    assert event.details["count"] == len(event.resource_ids)
    return event


@pytest.fixture
def seeded(db):
    tenant = make_tenant("reader")
    client = client_for(make_token(tenant, permissions=ALL_PERMISSIONS).raw)
    note = _write(client, scope="repository", repository="r1", kind="lesson", text=SECRET_TEXT)
    decision = _write(client, scope="repository", repository="r1", kind="decision", text=f"{SECRET_TEXT}, decided")
    own = _write(client, scope="user", user="u1", kind="preference", text=f"{SECRET_TEXT} (u1)")
    return tenant, client, {"note": note["id"], "decision": decision["id"], "own": own["id"]}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "query", "resource_type", "expected"),
    [
        ("/api/v1/memories", {}, "memory", {"note", "decision", "own"}),
        ("/api/v1/memories/{note}", {}, "memory", {"note"}),
        ("/api/v1/decisions", {"repository": "r1"}, "memory", {"decision"}),
        ("/api/v1/context", {"repository": "r1", "user": "u1"}, "memory", {"note", "decision", "own"}),
    ],
)
def test_it_audits_each_rest_read_of_memories_with_their_ids(seeded, path, query, resource_type, expected):
    tenant, client, ids = seeded
    before = len(_events(tenant))
    response = client.get(path.format(**ids), query)
    assert response.status_code == 200, response.content
    event = _one_new_read(tenant, before)
    assert event.resource_type == resource_type
    assert set(event.resource_ids) == {ids[name] for name in expected}
    assert event.actor.startswith("token:")


@pytest.mark.django_db
def test_it_audits_a_page_of_a_long_list_with_the_page_ids_only(seeded):
    tenant, client, ids = seeded
    before = len(_events(tenant))
    page = client.get("/api/v1/memories", {"limit": 2}).json()
    event = _one_new_read(tenant, before)
    assert event.resource_ids == [m["id"] for m in page["results"]] and event.details["count"] == 2
    assert event.details["list"] is True


@pytest.mark.django_db
def test_it_audits_reads_of_agents_md_proposals_exports_activity_and_tokens(seeded):
    tenant, client, _ids = seeded
    client.put("/api/v1/repositories/r1/agents-md", "# AGENTS.md\n\n## Always\n- test\n", content_type="text/markdown")
    proposal = client.post("/api/v1/proposals", {"repository": "r1", "section": "## Always", "addition": "- lint",
                                                 "reasoning": "because"}, format="json").json()  # fmt: skip
    job = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    reads = [
        ("/api/v1/repositories/r1/agents-md", "agents_md", "retrieve"),
        ("/api/v1/proposals", "proposal", "retrieve"),
        (f"/api/v1/proposals/{proposal['id']}", "proposal", "retrieve"),
        (f"/api/v1/exports/{job.id}", "export", "retrieve"),
        ("/api/v1/activity", "activity", "retrieve"),
        ("/api/v1/tokens", "api_token", "retrieve"),
        ("/api/v1/audit", "audit_event", "audit_exported"),
    ]
    for path, resource_type, action in reads:
        before = len(_events(tenant))
        assert client.get(path).status_code == 200, path
        event = _one_new_read(tenant, before, action=action)
        assert event.resource_type == resource_type, path
        assert event.resource_ids, path
    assert proposal["id"] in _events(tenant)[-5].resource_ids  # the proposal detail
    assert str(job.id) in _events(tenant)[-4].resource_ids


@pytest.mark.django_db
def test_it_audits_the_admins_memory_pages_as_the_person(seeded):
    tenant, _client, ids = seeded
    admin = Client()
    admin.force_login(User.objects.create_user("reviewer", password="x", is_staff=True, tenant=tenant))
    before = len(_events(tenant))
    page = admin.get("/admin/memories/memory/")
    assert page.status_code == 200
    event = _one_new_read(tenant, before)
    assert event.actor == "admin:reviewer" and event.details["view"] == "list"
    assert set(event.resource_ids) == set(ids.values())
    before = len(_events(tenant))
    assert admin.get(f"/admin/memories/memory/{ids['note']}/change/").status_code == 200
    event = _one_new_read(tenant, before)
    assert event.resource_ids == [ids["note"]] and event.details["view"] == "detail"


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_audits_the_mcp_tools_and_resource_that_read(live_server_url):
    tenant = make_tenant("mcp-reader")
    raw = make_token(tenant, permissions=ALL_PERMISSIONS).raw
    client = client_for(raw)
    decision = _write(client, scope="repository", repository="r1", kind="decision", text=SECRET_TEXT)
    url = f"{live_server_url}/mcp/"

    before = len(_events(tenant))
    error, _payload = call(url, raw, "get_session_context", {"repository": "r1"})
    assert error is False
    assert _one_new_read(tenant, before).resource_ids == [decision["id"]]

    before = len(_events(tenant))
    error, _payload = call(url, raw, "list_decisions", {"repository": "r1"})
    assert error is False
    assert _one_new_read(tenant, before).resource_ids == [decision["id"]]

    async def read_resource():
        async with mcp_client(url, raw) as mcp:
            return await mcp.read_resource("memory://context/r1")

    before = len(_events(tenant))
    asyncio.run(read_resource())
    assert _one_new_read(tenant, before).resource_ids == [decision["id"]]
