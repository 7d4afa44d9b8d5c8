"""The one error shape, limits, and no echo of submitted values."""

import logging

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_it_answers_400_for_invalid_json(api_client):
    response = api_client.post("/api/v1/tokens", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


@override_settings(MAX_REQUEST_BYTES=1000)
def test_it_answers_413_for_an_oversized_body(api_client):
    response = api_client.post("/api/v1/tokens", data='{"name": "' + "x" * 2000 + '"}', content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_it_answers_json_404_for_an_unknown_api_path(api_client):
    response = api_client.get("/api/v1/no-such-thing")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found.", "fields": {}}}


def test_it_never_echoes_an_invalid_choice(api_client):
    response = api_client.get("/api/v1/memories", {"kind": "secret-VALUE-123"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"kind": ["Not a valid choice."]}
    assert "VALUE-123" not in response.content.decode()


def test_it_answers_400_naming_a_malformed_id(api_client):
    response = api_client.get("/api/v1/memories/not-a-uuid")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"id": ["Not a UUID."]}


def test_it_answers_400_for_an_out_of_range_limit(api_client):
    response = api_client.get("/api/v1/memories", {"limit": 500})
    assert response.status_code == 400
    assert "limit" in response.json()["error"]["fields"]


def test_it_logs_requests_as_json_without_bodies(api_client, caplog):
    canary = "CANARY-body-7f3a"
    with caplog.at_level(logging.INFO, logger="memory_service.request"):
        api_client.post("/api/v1/tokens", {"name": canary}, format="json")
    records = [r for r in caplog.records if r.name == "memory_service.request"]
    assert len(records) == 1
    assert records[0].path == "/api/v1/tokens" and records[0].status == 201
    assert records[0].client == "agent"
    assert canary not in caplog.text


def test_it_answers_503_with_retry_after_when_the_database_is_unreachable(api_client, monkeypatch):
    from django.db import OperationalError

    import memory_service.memories.api.views as views

    def unreachable(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(views, "memory_list", unreachable)
    response = api_client.get("/api/v1/memories")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "unavailable"
    assert "refused" not in response.content.decode()


def test_a_database_failure_outside_a_view_is_a_503_too(api_client, monkeypatch):
    from django.db import OperationalError

    from tenants import authentication

    def unreachable(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(authentication, "authenticate_token", unreachable)
    response = api_client.get("/api/v1/memories")
    assert response.status_code == 503 and response.json()["error"]["code"] == "unavailable"
