"""MCP tools obey the same access policy and limits as REST: they reach the same services."""

import pytest

from tests.conftest import client_for
from tests.factories import make_tenant, make_token
from tests.mcp.helpers import call

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

ALL = ["memory:read", "memory:write", "proposals:write", "export", "admin"]


@pytest.fixture
def acme():
    tenant = make_tenant("acme")
    return tenant, make_token(tenant, permissions=ALL).raw


def _write(raw, **body):
    response = client_for(raw).post("/api/v1/memories", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_it_refuses_an_overlong_query_as_rest_does(live_server_url, acme):
    url = f"{live_server_url}/mcp/"
    error, message = call(url, acme[1], "search_memory", {"query": "x" * 4001, "repository": "r1"})
    assert error is True and "query" in message and "4000" in message
    rest = client_for(acme[1]).post("/api/v1/search", {"query": "x" * 4001, "repository": "r1"}, format="json")
    assert rest.status_code == 400


def test_it_refuses_an_overlong_note_before_masking_it(live_server_url, acme, monkeypatch):
    masked = []
    import memory_service.memories.services as services

    original = services.mask_fields
    monkeypatch.setattr(services, "mask_fields", lambda **kw: masked.append(1) or original(**kw))
    error, message = call(f"{live_server_url}/mcp/", acme[1], "add_note", {"text": "y" * 70_000, "repository": "r1"})
    assert error is True and "text" in message
    assert masked == []
    assert client_for(acme[1]).get("/api/v1/memories").json()["results"] == []


def test_it_keeps_a_repository_bound_agent_out_of_user_scope(live_server_url, acme):
    tenant, admin = acme
    bound = make_token(tenant, name="r1-bot", repositories=["r1"]).raw
    _write(admin, scope="user", user="bob", text="bob keeps his notes on tabs")
    url = f"{live_server_url}/mcp/"
    error, message = call(url, bound, "search_memory", {"query": "tabs", "user": "bob", "repository": "r1"})
    assert error is True and "permission_denied" in message
    error, message = call(url, bound, "get_session_context", {"user": "bob", "repository": "r1"})
    assert error is True and "permission_denied" in message
    error, message = call(url, bound, "add_note", {"text": "x", "scope": "user", "user": "bob"})
    assert error is True and "permission_denied" in message
    error, message = call(url, bound, "list_decisions", {"repository": "r2"})
    assert error is True and "permission_denied" in message


def test_it_refuses_a_private_memory_superseding_a_shared_decision(live_server_url, acme):
    tenant, admin = acme
    decision = _write(admin, scope="repository", repository="r1", kind="decision", text="use postgres")
    private = _write(admin, scope="user", user="alice", kind="decision", text="use sqlite")
    url = f"{live_server_url}/mcp/"
    error, message = call(url, admin, "supersede_memory", {"memory_id": decision["id"], "by": private["id"]})
    assert error is True and "invalid" in message
    error, message = call(url, admin, "add_note", {"text": "use redis", "kind": "decision", "scope": "user",
                                                   "user": "alice", "supersedes": [decision["id"]]})  # fmt: skip
    assert error is True and "supersedes" in message
    assert client_for(admin).get(f"/api/v1/memories/{decision['id']}").json()["status"] == "current"
