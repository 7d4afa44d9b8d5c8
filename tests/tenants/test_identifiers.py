"""Identifiers are keys, never masked: one that carries personal data or a secret is refused with a
400 naming the field, whichever interface sends it, and never reaches a log line."""

import logging

import pytest

from memory_service.exceptions import ValidationError
from tenants.identifiers import loggable_path, personal_data_in, validate_identifier, validate_metadata_keys

pytestmark = pytest.mark.django_db

AWS_KEY = "AKIAQWERTYUIOPASDFGH"
CARRYING_PII = {
    "phone": ("090-1234-5678", "PHONE_NUMBER"),
    "phone with underscores": ("090_1234_5678", "PHONE_NUMBER"),
    "us phone": ("1-212-456-7890", "PHONE_NUMBER"),
    "card": ("4111111111111111", "CREDIT_CARD"),
    "card with dots": ("4111.1111.1111.1111", "CREDIT_CARD"),
    "my number": ("123456789018", "JP_MY_NUMBER"),
    "ssn": ("536-22-8451", "US_SSN"),
    "aws key": (AWS_KEY, "SECRET"),
    "github token": ("ghp_" + "C4nAry0123456789abcdefGHIJKLMNOPqrst", "SECRET"),
}
PLAIN = ["u1", "alice", "priya.raman", "web-frontend", "s-20240115-abc", "release-1.2.3", "2024-01-15",
         "PAYMENTS-123", "user:42", "1701234567890", "sess_8f3a2b1c", "ticket-4521"]  # fmt: skip


@pytest.mark.parametrize(("value", "entity"), CARRYING_PII.values(), ids=CARRYING_PII.keys())
def test_an_identifier_carrying_personal_data_is_refused_naming_the_field(value, entity):
    with pytest.raises(ValidationError) as raised:
        validate_identifier(value, field="repository")

    assert raised.value.fields == {"repository": [f"Must not carry personal data or secrets ({entity})."]}
    assert value not in str(raised.value.message)


@pytest.mark.parametrize("value", PLAIN)
def test_ordinary_identifiers_pass(value):
    assert validate_identifier(value, field="user") == value
    assert personal_data_in(value) is None


def test_metadata_keys_are_checked_at_every_depth():
    validate_metadata_keys({"ticket": "x", "nested": {"owner": "y"}})
    with pytest.raises(ValidationError) as raised:
        validate_metadata_keys({"nested": {"090-1234-5678": "y"}})
    assert "metadata" in raised.value.fields


def test_a_log_path_never_carries_a_refused_identifier():
    assert loggable_path("/api/v1/sessions/090-1234-5678/notes/plan") == "/api/v1/sessions/<redacted>/notes/plan"
    assert loggable_path(f"/api/v1/repositories/{AWS_KEY}/agents-md") == "/api/v1/repositories/<redacted>/agents-md"
    assert loggable_path("/api/v1/sessions/s1/notes/plan") == "/api/v1/sessions/s1/notes/plan"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "user", "user": "090-1234-5678", "text": "x"}, "user"),
        ({"scope": "repository", "repository": "4111111111111111", "text": "x"}, "repository"),
        ({"scope": "session", "session": "123456789018", "text": "x"}, "session"),
        ({"scope": "user", "user": "u1", "text": "x", "external_id": AWS_KEY}, "external_id"),
        ({"scope": "user", "user": "u1", "text": "x", "metadata": {"090-1234-5678": "v"}}, "metadata"),
    ],
)
def test_rest_refuses_an_identifier_carrying_pii_and_logs_no_value(api_client, caplog, body, field):
    with caplog.at_level(logging.INFO):
        response = api_client.post("/api/v1/memories", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    named = [body.get("user"), body.get("repository"), body.get("session"), body.get("external_id")]
    raw = next(value for value in [*named, *body.get("metadata", {})] if value and value != "u1")
    assert raw not in response.content.decode()
    assert raw not in caplog.text
    assert [record.path for record in caplog.records if record.name == "memory_service.request"] == ["/api/v1/memories"]


def test_rest_refuses_a_session_note_named_with_pii_and_redacts_the_logged_path(api_client, caplog):
    with caplog.at_level(logging.INFO):
        response = api_client.put(
            "/api/v1/sessions/090-1234-5678/notes/plan", {"text": "x", "user": "u1"}, format="json"
        )
        named = api_client.put("/api/v1/sessions/s1/notes/4111111111111111", {"text": "x", "user": "u1"}, format="json")

    assert response.status_code == 400 and "session" in response.json()["error"]["fields"]
    assert named.status_code == 400 and "name" in named.json()["error"]["fields"]
    paths = [record.path for record in caplog.records if record.name == "memory_service.request"]
    assert paths == ["/api/v1/sessions/<redacted>/notes/plan", "/api/v1/sessions/s1/notes/<redacted>"]
