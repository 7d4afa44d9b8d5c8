"""AGENTS.md import and fetch, and proposals, over REST."""

import pytest

from audit.models import AuditEvent
from proposals.models import AgentsDocumentVersion, Proposal
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.factories import as_labels, make_token

pytestmark = pytest.mark.django_db

URL = "/api/v1/repositories/web/agents-md"
DOC = "# AGENTS.md\n\n## Boundaries\n\n### Always\n- Read existing patterns first\n"
PROPOSAL = {
    "repository": "web",
    "section": "### Always",
    "addition": "Run `pnpm typecheck` after editing TS files",
    "reasoning": "CI failed twice on type errors the agent could have caught locally.",
}


def put_doc(client, text=DOC, etag=None, url=URL):
    headers = {"HTTP_IF_MATCH": etag} if etag else {}
    return client.put(url, data=text.encode(), content_type="text/markdown", **headers)


def test_an_import_is_served_as_markdown_with_its_etag(api_client):
    assert api_client.get(URL).status_code == 404
    created = put_doc(api_client)
    assert created.status_code == 201
    assert created.json()["version"] == 1 and created.json()["changed"] is True
    fetched = api_client.get(URL, HTTP_ACCEPT="text/markdown")
    assert fetched.status_code == 200
    assert fetched["Content-Type"] == "text/markdown; charset=utf-8"
    assert fetched.content.decode() == DOC
    assert fetched["ETag"] == created["ETag"] == created.json()["etag"]
    assert api_client.get(URL, HTTP_IF_NONE_MATCH=fetched["ETag"]).status_code == 304


def test_a_second_import_needs_the_current_etag(tenant, api_client):
    first = put_doc(api_client)
    missing = put_doc(api_client, DOC + "- more\n")
    assert missing.status_code == 428 and "If-Match" in missing.json()["error"]["fields"]
    second = put_doc(api_client, DOC + "- more\n", etag=first["ETag"])
    assert second.status_code == 200 and second.json()["version"] == 2
    stale = put_doc(api_client, DOC + "- lost update\n", etag=first["ETag"])
    assert stale.status_code == 412 and stale.json()["error"]["code"] == "precondition_failed"
    same = put_doc(api_client, DOC + "- more\n", etag=second["ETag"])
    assert same.status_code == 200 and same.json() | {"changed": False} == same.json() and same.json()["version"] == 2
    assert "lost update" not in api_client.get(URL).content.decode()
    with tenant_context(tenant.id):
        assert AgentsDocumentVersion.objects.count() == 2
        assert AuditEvent.objects.filter(action="agents_md_imported").count() == 2


def test_an_import_is_masked_and_accepts_json_too(api_client):
    response = api_client.put(URL, {"text": "## Contacts\n- Ask alice@example.com\n"}, format="json")
    assert response.status_code == 201 and response.json()["pii"] == {"EMAIL_ADDRESS": 1}
    assert as_labels(api_client.get(URL).content.decode()) == "## Contacts\n- Ask <EMAIL_ADDRESS>\n"


def test_import_needs_admin_and_respects_repository_bindings(tenant):
    writer = client_for(make_token(tenant, permissions=["memory:read", "memory:write", "proposals:write"]).raw)
    assert put_doc(writer).status_code == 403
    bound = client_for(make_token(tenant, permissions=["admin", "memory:read"], repositories=["api"]).raw)
    assert put_doc(bound).status_code == 403
    assert bound.get(URL).status_code == 403


def test_bad_imports_are_clear_4xx(api_client):
    assert put_doc(api_client, "   ").status_code == 400
    too_big = put_doc(api_client, "x" * (64 * 1024 + 1))
    assert too_big.status_code == 413 and "text" in too_big.json()["error"]["fields"]
    bad_repo = put_doc(api_client, url="/api/v1/repositories/a%20b/agents-md")
    assert bad_repo.status_code == 400 and "repository" in bad_repo.json()["error"]["fields"]
    latin1 = api_client.put(URL, data="é".encode("latin-1"), content_type="text/markdown")
    assert latin1.status_code == 400


def test_another_tenant_cannot_read_or_overwrite_the_document(api_client, other_client):
    first = put_doc(api_client)
    assert other_client.get(URL).status_code == 404
    # Charlie's import creates Charlie's own document; it cannot use or see Acme's.
    assert put_doc(other_client, "## Charlie\n", etag=first["ETag"]).status_code == 412
    assert put_doc(other_client, "## Charlie\n").status_code == 201
    assert api_client.get(URL).content.decode() == DOC


def test_filing_a_proposal_masks_it_and_merges_duplicates(tenant, api_client):
    filed = api_client.post(
        "/api/v1/proposals",
        PROPOSAL | {"reasoning": "Reported by bob@example.com on call 090-1234-5678."},
        format="json",
    )
    assert filed.status_code == 201
    body = filed.json()
    assert body["status"] == "pending" and body["merged"] is False and body["section"] == "### Always"
    assert "bob@example.com" not in body["reasoning"] and body["pii"]["EMAIL_ADDRESS"] == 1
    other_agent = client_for(make_token(tenant, name="cursor", permissions=["memory:read", "proposals:write"]).raw)
    again = other_agent.post(
        "/api/v1/proposals",
        PROPOSAL | {"addition": "  run `PNPM typecheck`  after editing TS files "},
        format="json",
    )
    assert again.status_code == 200 and again.json()["merged"] is True and again.json()["id"] == body["id"]
    assert again.json()["filed_count"] == 2
    with tenant_context(tenant.id):
        assert Proposal.objects.count() == 1
        stored = Proposal.objects.get()
        assert "bob@example.com" not in stored.reasoning and "090-1234-5678" not in stored.reasoning
        assert AuditEvent.objects.filter(action="proposal_filed").count() == 2
        event = AuditEvent.objects.filter(action="proposal_filed").order_by("seq").first()
        assert event.resource_ids == [body["id"]] and event.details["merged"] is False
        assert "typecheck" not in str(event.details) and "example" not in str(event.details)
    # Both filers see it in their list.
    assert [p["id"] for p in other_agent.get("/api/v1/proposals").json()["results"]] == [body["id"]]


def test_the_list_shows_a_token_its_own_proposals_and_an_admin_all(tenant, api_client):
    filer = client_for(make_token(tenant, name="filer", permissions=["memory:read", "proposals:write"]).raw)
    bystander = client_for(make_token(tenant, name="bystander", permissions=["memory:read"]).raw)
    mine = filer.post("/api/v1/proposals", PROPOSAL, format="json").json()
    assert [p["id"] for p in filer.get("/api/v1/proposals", {"status": "pending"}).json()["results"]] == [mine["id"]]
    assert filer.get("/api/v1/proposals", {"status": "approved"}).json()["results"] == []
    assert bystander.get("/api/v1/proposals").json()["results"] == []
    assert bystander.get(f"/api/v1/proposals/{mine['id']}").status_code == 404
    assert [p["id"] for p in api_client.get("/api/v1/proposals").json()["results"]] == [mine["id"]]
    assert filer.get(f"/api/v1/proposals/{mine['id']}").json()["status"] == "pending"


def test_filing_needs_the_proposals_permission(tenant):
    reader = client_for(make_token(tenant, permissions=["memory:read", "memory:write"]).raw)
    response = reader.post("/api/v1/proposals", PROPOSAL, format="json")
    assert response.status_code == 403 and "proposals:write" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"section": "# Top"}, "section"),
        ({"section": ""}, "section"),
        ({"addition": "ok\n## Injected heading"}, "addition"),
        ({"addition": ""}, "addition"),
        ({"reasoning": ""}, "reasoning"),
        ({"repository": "bob@example.com"}, "repository"),
        ({"type": "x"}, "type"),
    ],
)
def test_bad_proposals_are_400_naming_the_field_and_store_nothing(tenant, api_client, change, field):
    response = api_client.post("/api/v1/proposals", PROPOSAL | change, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"]
    assert "bob@example.com" not in response.content.decode()
    with tenant_context(tenant.id):
        assert Proposal.objects.count() == 0


def test_another_tenant_never_sees_a_proposal(api_client, other_client):
    mine = api_client.post("/api/v1/proposals", PROPOSAL, format="json").json()
    assert other_client.get("/api/v1/proposals").json()["results"] == []
    assert other_client.get(f"/api/v1/proposals/{mine['id']}").status_code == 404
    assert other_client.get("/api/v1/proposals/not-a-uuid").status_code == 400
