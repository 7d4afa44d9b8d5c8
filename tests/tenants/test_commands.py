"""Operator commands run as the platform role; their tokens work against the API at once."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_it_creates_a_tenant_and_prints_a_working_token_as_json():
    printed = json.loads(run("create_tenant", "acme", "--json"))
    assert printed["tenant"] == "acme"
    client = client_for(printed["token"])
    assert client.get("/api/v1/memories").status_code == 200
    # Default permissions: read and write memories, nothing else.
    assert client.get("/api/v1/tokens").status_code == 403
    assert client_for(None).get("/api/v1/memories").status_code == 401


def test_it_refuses_a_taken_slug():
    run("create_tenant", "acme", "--json")
    with pytest.raises(CommandError, match="already exists"):
        run("create_tenant", "acme", "--json")


def test_it_issues_tokens_with_permissions_and_a_user_binding():
    run("create_tenant", "acme")
    printed = json.loads(
        run("create_token", "acme", "--name", "claude-code", "--permissions", "admin", "--user", "u1", "--json")
    )
    tokens = client_for(printed["token"]).get("/api/v1/tokens").json()["results"]
    mine = next(t for t in tokens if t["name"] == "claude-code")
    assert mine["permissions"] == ["admin"] and mine["user"] == "u1"


def test_it_refuses_an_unknown_permission_or_tenant():
    run("create_tenant", "acme")
    with pytest.raises(CommandError, match="Permissions must be chosen from"):
        run("create_token", "acme", "--name", "x", "--permissions", "memory:read,superpower")
    with pytest.raises(CommandError, match="No tenant"):
        run("create_token", "nope", "--name", "x")


def test_it_revokes_a_token_by_prefix():
    raw = json.loads(run("create_tenant", "acme", "--json"))["token"]
    assert client_for(raw).get("/api/v1/memories").status_code == 200
    assert "Revoked" in run("revoke_token", "acme", raw.split(".")[0])
    assert client_for(raw).get("/api/v1/memories").status_code == 401


def test_it_does_not_revoke_another_tenants_token():
    raw = json.loads(run("create_tenant", "acme", "--json"))["token"]
    run("create_tenant", "charlie")
    with pytest.raises(CommandError, match="No token"):
        run("revoke_token", "charlie", raw.split(".")[0])
    assert client_for(raw).get("/api/v1/memories").status_code == 200


def test_it_creates_a_tenant_administrator_who_sees_only_that_tenant(monkeypatch):
    from django.test import Client

    run("create_tenant", "acme", "--token-name", "acme-agent")
    run("create_tenant", "charlie", "--token-name", "charlie-agent")
    monkeypatch.setattr("sys.stdin", StringIO("a-Long-passw0rd\n"))
    assert "Created tenant administrator" in run("create_tenant_admin", "alice", "--tenant", "acme", "--password-stdin")

    client = Client()
    # Through the login form: the login throttle needs the request.
    login = client.post("/admin/login/", {"username": "alice", "password": "a-Long-passw0rd", "next": "/admin/"})
    assert login.status_code == 302
    page = client.get("/admin/tenants/apitoken/").content.decode()
    assert "acme-agent" in page and "charlie-agent" not in page


def test_it_refuses_a_weak_administrator_password(monkeypatch):
    run("create_tenant", "acme")
    monkeypatch.setattr("sys.stdin", StringIO("123\n"))
    with pytest.raises(CommandError, match="too short"):
        run("create_tenant_admin", "alice", "--tenant", "acme", "--password-stdin")
