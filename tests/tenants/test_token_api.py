import pytest

from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def test_it_lists_only_the_tenants_tokens(api_client, other_client):
    names = [t["name"] for t in api_client.get("/api/v1/tokens").json()["results"]]
    other_names = [t["name"] for t in other_client.get("/api/v1/tokens").json()["results"]]
    assert names == ["agent"] and other_names == ["agent"]
    first = api_client.get("/api/v1/tokens").json()["results"][0]
    assert "hashed_key" not in first and "token" not in first


def test_it_creates_a_token_shown_once_that_works(api_client):
    response = api_client.post(
        "/api/v1/tokens", {"name": "ci-bot", "permissions": ["memory:read"], "user": "u-42"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["permissions"] == ["memory:read"] and body["user"] == "u-42"
    assert client_for(body["token"]).get("/api/v1/memories").status_code == 200
    listed = {t["prefix"]: t for t in api_client.get("/api/v1/tokens").json()["results"]}
    assert "token" not in listed[body["prefix"]]


def test_it_refuses_an_unknown_permission_without_echoing_it(api_client):
    response = api_client.post("/api/v1/tokens", {"name": "x", "permissions": ["root-SECRET123"]}, format="json")
    assert response.status_code == 400
    assert "permissions" in response.json()["error"]["fields"]
    assert "SECRET123" not in response.content.decode()


def test_it_refuses_an_email_as_user_id(api_client):
    response = api_client.post("/api/v1/tokens", {"name": "x", "user": "alice@example.com"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"user": ["Use an opaque id, not an email address."]}
    assert "alice@example.com" not in response.content.decode()


def test_it_revokes_a_token(api_client):
    created = api_client.post("/api/v1/tokens", {"name": "temp"}, format="json").json()
    response = api_client.post(f"/api/v1/tokens/{created['prefix']}/revoke")
    assert response.status_code == 200 and response.json()["revoked"] is True
    assert client_for(created["token"]).get("/api/v1/memories").status_code == 401


def test_it_answers_404_when_another_tenant_revokes_a_token(api_client, other_client):
    created = api_client.post("/api/v1/tokens", {"name": "temp"}, format="json").json()
    response = other_client.post(f"/api/v1/tokens/{created['prefix']}/revoke")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert client_for(created["token"]).get("/api/v1/memories").status_code == 200
