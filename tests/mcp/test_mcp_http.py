"""The MCP endpoint with the SDK's own client over streamable HTTP, against the real service."""

import asyncio

import httpx
import pytest

from tests.conftest import client_for
from tests.factories import make_tenant, make_token
from tests.mcp.helpers import call, mcp_client

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

TOOLS = {"search_memory", "add_note", "write_session_note", "get_session_context", "supersede_memory",
         "propose_agents_md_update", "list_decisions"}  # fmt: skip
ALL = ["memory:read", "memory:write", "proposals:write", "export", "admin"]


@pytest.fixture
def acme():
    tenant = make_tenant("acme")
    return tenant, make_token(tenant, permissions=ALL).raw


@pytest.fixture
def charlie():
    tenant = make_tenant("charlie")
    return tenant, make_token(tenant, permissions=ALL).raw


def test_it_lists_the_tools_with_read_only_hints(live_server_url, acme):
    async def run():
        async with mcp_client(f"{live_server_url}/mcp/", acme[1]) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in asyncio.run(run())}
    assert set(tools) >= TOOLS
    assert tools["search_memory"].annotations.read_only_hint is True
    assert tools["list_decisions"].annotations.read_only_hint is True
    assert tools["add_note"].annotations.read_only_hint is False
    assert "BEFORE acting" in tools["search_memory"].description
    assert 'priority "high"' in tools["add_note"].description
    assert tools["search_memory"].input_schema["properties"]["top"]["maximum"] == 50
    assert "decision" in tools["add_note"].input_schema["properties"]["kind"]["enum"]


def test_it_finds_over_rest_a_note_added_over_mcp_and_the_reverse(live_server_url, acme):
    url = f"{live_server_url}/mcp/"
    error, added = call(url, acme[1], "add_note", {"text": "MCP note: restart workers after deploy",
                                                     "kind": "lesson", "repository": "r1"})  # fmt: skip
    assert error is False and added["created"] is True
    rest = client_for(acme[1])
    listed = rest.get("/api/v1/memories", {"repository": "r1"}).json()["results"]
    assert [m["id"] for m in listed] == [added["id"]]

    rest.post("/api/v1/memories", {"scope": "repository", "repository": "r1", "text": "REST note about caching"},
              format="json")  # fmt: skip
    error, found = call(url, acme[1], "search_memory", {"query": "caching", "repository": "r1"})
    assert error is False
    assert "REST note about caching" in [i["text"] for i in found["items"]]
    assert "<memory " in found["context"]


def test_add_note_files_by_kind_unless_a_scope_is_given(live_server_url, acme):
    url = f"{live_server_url}/mcp/"
    common = {"repository": "r1", "user": "u1"}
    calls = [
        ({"text": "prefers terse answers", "kind": "preference"}, ("user", "u1", "")),
        ({"text": "restart workers after deploy", "kind": "lesson"}, ("repository", "", "r1")),
        ({"text": "prefers tabs", "kind": "preference", "scope": "repository"}, ("repository", "", "r1")),
    ]
    for arguments, (scope, user, repository) in calls:
        error, added = call(url, acme[1], "add_note", arguments | common)
        assert error is False and added["created"] is True
        stored = client_for(acme[1]).get(f"/api/v1/memories/{added['id']}").json()
        assert (stored["scope"], stored["user"], stored["repository"]) == (scope, user, repository)
    error, refused = call(url, acme[1], "add_note", {"text": "no owner", "kind": "lesson", "user": "u1"})
    assert error is True and "repository" in refused


def test_it_calls_every_tool(live_server_url, acme):
    url = f"{live_server_url}/mcp/"
    _, old = call(url, acme[1], "add_note", {"text": "Use MySQL", "kind": "decision", "repository": "r1"})
    _, new = call(url, acme[1], "add_note", {"text": "Use PostgreSQL", "kind": "decision", "repository": "r1"})
    error, superseded = call(url, acme[1], "supersede_memory", {"memory_id": old["id"], "by": new["id"]})
    assert error is False and superseded["status"] == "superseded"
    error, decisions = call(url, acme[1], "list_decisions", {"repository": "r1"})
    assert [d["status"] for d in decisions["decisions"]] == ["current", "superseded"]
    error, note = call(url, acme[1], "write_session_note", {"session": "s1", "name": "plan", "text": "step 1",
                                                            "user": "u1", "repository": "r1"})  # fmt: skip
    assert error is False and note["created"] is True
    error, context = call(url, acme[1], "get_session_context", {"repository": "r1", "user": "u1", "session": "s1"})
    assert error is False and "## Current decisions" in context and "Use PostgreSQL" in context
    assert "step 1" in context and "Use MySQL" not in context


def test_an_agent_proposes_an_agents_md_rule_it_cannot_write_and_others_never_see_it(live_server_url, acme, charlie):
    url = f"{live_server_url}/mcp/"
    proposal = {"repository": "web", "section": "### Always", "addition": "Run pnpm typecheck",
                "reasoning": "Type errors reached CI; reported by bob@example.com"}  # fmt: skip
    error, filed = call(url, acme[1], "propose_agents_md_update", proposal)
    assert error is False and filed["status"] == "pending" and filed["merged"] is False
    assert filed["pii"] == {"EMAIL_ADDRESS": 1}
    error, again = call(url, acme[1], "propose_agents_md_update", proposal)
    assert again["id"] == filed["id"] and again["merged"] is True
    listed = client_for(acme[1]).get("/api/v1/proposals").json()["results"]
    assert [p["id"] for p in listed] == [filed["id"]] and "bob@example.com" not in listed[0]["reasoning"]
    assert client_for(charlie[1]).get(f"/api/v1/proposals/{filed['id']}").status_code == 404
    assert client_for(acme[1]).get("/api/v1/repositories/web/agents-md").status_code == 404

    reader = make_token(acme[0], name="reader", permissions=["memory:read", "memory:write"]).raw
    error, message = call(url, reader, "propose_agents_md_update", proposal)
    assert error is True and "proposals:write" in str(message)
    error, message = call(url, acme[1], "propose_agents_md_update", proposal | {"section": "# Top"})
    assert error is True and "section" in str(message)


def test_it_offers_the_session_context_as_a_resource(live_server_url, acme):
    call(f"{live_server_url}/mcp/", acme[1], "add_note", {"text": "Adopt trunk-based development",
                                                          "kind": "decision", "repository": "r1"})  # fmt: skip

    async def run():
        async with mcp_client(f"{live_server_url}/mcp/", acme[1]) as client:
            templates = (await client.list_resource_templates()).resource_templates
            content = await client.read_resource("memory://context/r1")
            return templates, content

    templates, content = asyncio.run(run())
    assert [t.uri_template for t in templates] == ["memory://context/{repository}"]
    assert "Adopt trunk-based development" in content.contents[0].text


def test_it_returns_domain_errors_as_readable_tool_errors(live_server_url, acme):
    error, message = call(f"{live_server_url}/mcp/", acme[1], "add_note", {"text": "x", "scope": "user",
                                                                           "user": "bob@example.com"})  # fmt: skip
    assert error is True and "opaque id" in str(message) and "bob@example.com" not in str(message)
    error, message = call(f"{live_server_url}/mcp/", acme[1], "supersede_memory", {"memory_id": "nope", "by": "x"})
    assert error is True and "not a valid memory id" in str(message)


def test_it_shows_another_tenant_nothing(live_server_url, acme, charlie):
    url = f"{live_server_url}/mcp/"
    _, added = call(url, acme[1], "add_note", {"text": "acme-only deployment detail", "repository": "r1"})
    error, found = call(url, charlie[1], "search_memory", {"query": "deployment detail", "repository": "r1"})
    assert error is False and found["items"] == []
    error, message = call(url, charlie[1], "supersede_memory", {"memory_id": added["id"], "by": added["id"]})
    assert error is True and "not_found" in str(message)
    error, decisions = call(url, charlie[1], "list_decisions", {"repository": "r1"})
    assert decisions["decisions"] == []


def test_it_refuses_a_missing_or_bad_token_with_401(live_server_url, acme):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    token = acme[1]
    altered = token[:-1] + ("y" if token.endswith("x") else "x")  # one character off, never the token itself
    for auth in (None, "Bearer nope.nope", f"Bearer {altered}"):
        response = httpx.post(f"{live_server_url}/mcp/", json=body,
                              headers=headers | ({"Authorization": auth} if auth else {}))  # fmt: skip
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_it_serves_the_tenant_path_only_for_the_tokens_tenant(live_server_url, acme, charlie):
    async def tool_names(path, token):
        async with mcp_client(f"{live_server_url}{path}", token) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert asyncio.run(tool_names("/t/acme/mcp/", acme[1])) >= TOOLS
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {acme[1]}"}
    assert httpx.post(f"{live_server_url}/t/charlie/mcp/", json=body, headers=headers).status_code == 404
    assert httpx.post(f"{live_server_url}/t/nobody/mcp/", json=body, headers=headers).status_code == 404


def test_it_rejects_a_foreign_browser_origin(live_server_url, acme):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {acme[1]}",
               "Origin": "https://evil.example"}  # fmt: skip
    assert httpx.post(f"{live_server_url}/mcp/", json=body, headers=headers).status_code == 403


def test_it_enforces_token_permissions_in_tools(live_server_url):
    tenant = make_tenant("readonly")
    reader = make_token(tenant, permissions=["memory:read"]).raw
    error, message = call(f"{live_server_url}/mcp/", reader, "add_note", {"text": "x", "repository": "r1"})
    assert error is True and "memory:write" in str(message)


def test_it_keeps_session_tools_inside_the_tenant(live_server_url, acme, charlie):
    url = f"{live_server_url}/mcp/"
    call(url, acme[1], "write_session_note", {"session": "s1", "name": "plan", "text": "acme secret plan",
                                              "user": "u1", "repository": "r1"})  # fmt: skip
    error, note = call(url, charlie[1], "write_session_note", {"session": "s1", "name": "plan",
                                                               "text": "charlie plan", "user": "u1"})  # fmt: skip
    assert error is False and note["created"] is True
    error, context = call(url, charlie[1], "get_session_context", {"repository": "r1", "user": "u1", "session": "s1"})
    assert error is False and "acme secret plan" not in context and "charlie plan" in context
