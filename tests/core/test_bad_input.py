"""Hostile input is a 4xx in the one error shape, never a 500, and the submitted value appears
neither in the response nor in any log record."""

import base64
import json
import logging

import pytest

from memory_service.inputs import LONE_SURROGATE, MAX_JSON_DEPTH

pytestmark = pytest.mark.django_db

CANARY = "CANARY-7c41e0"
LIST_URLS = [
    "/api/v1/memories",
    "/api/v1/decisions?repository=r1",
    "/api/v1/proposals",
    "/api/v1/activity",
    "/api/v1/audit",
]


@pytest.fixture
def logs(caplog):
    """Every log record of the request, Django's request logger (which does not propagate) included."""
    request_logger = logging.getLogger("django.request")
    request_logger.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    yield caplog
    request_logger.removeHandler(caplog.handler)


def logged(caplog) -> str:
    """All that was logged: messages, tracebacks and the records' extra attributes."""
    return caplog.text + "".join(repr(vars(record)) for record in caplog.records)


def assert_refused(response, caplog, value: str, status: int = 400) -> dict:
    """``response`` is ``status`` in the one error shape, and ``value`` was echoed nowhere."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}
    assert value not in response.content.decode("utf-8", "replace")
    assert value not in logged(caplog)
    return body["error"]


def cursor(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


@pytest.mark.parametrize("url", LIST_URLS)
@pytest.mark.parametrize(
    "value",
    [
        cursor(f"o=0&p={CANARY}"),  # a position that is not a time
        cursor(f"o=0&p=%00{CANARY}"),  # a NUL character in the position
        cursor(f"o=0&p=2026-13-45+99:00:00{CANARY}"),
        cursor(f"o={CANARY}&p="),
        f"{CANARY}!!",  # not base64 at all
    ],
)
def test_it_answers_400_for_a_malformed_cursor_without_echoing_it(api_client, logs, url, value):
    separator = "&" if "?" in url else "?"
    response = api_client.get(f"{url}{separator}cursor={value}")
    error = assert_refused(response, logs, CANARY)
    assert error["fields"] == {"cursor": ["Invalid cursor."]}
    assert value not in response.content.decode() and value not in logged(logs)


def test_it_still_follows_a_cursor_it_issued(api_client):
    for n in range(3):
        api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": f"note {n}"}, format="json")
    first = api_client.get("/api/v1/memories", {"limit": 2}).json()
    second = api_client.get("/api/v1/memories", {"limit": 2, "cursor": first["next"]}).json()
    assert [m["text"] for m in first["results"] + second["results"]] == ["note 2", "note 1", "note 0"]


def nested(depth: int, leaf: str = CANARY) -> str:
    """A JSON value of ``depth`` nested arrays around a string."""
    return "[" * depth + json.dumps(leaf) + "]" * depth


def memory_body(metadata_json: str) -> str:
    return '{"scope": "user", "user": "u1", "text": "deep", "metadata": {"a": ' + metadata_json + "}}"


@pytest.mark.parametrize("depth", [1_000, 100_000, MAX_JSON_DEPTH - 1])
def test_it_answers_400_for_json_nested_deeper_than_the_limit(api_client, logs, depth):
    # The body object and metadata are two levels: MAX_JSON_DEPTH - 1 arrays inside them is one too many.
    response = api_client.post("/api/v1/memories", memory_body(nested(depth)), content_type="application/json")
    error = assert_refused(response, logs, CANARY)
    assert str(MAX_JSON_DEPTH) in error["message"]


def test_it_accepts_json_nested_up_to_the_limit(api_client):
    response = api_client.post(
        "/api/v1/memories", memory_body(nested(MAX_JSON_DEPTH - 2, "fine")), content_type="application/json"
    )
    assert response.status_code == 201, response.content


def test_it_answers_400_for_deep_json_on_every_endpoint(api_client, logs):
    response = api_client.post("/api/v1/search", '{"query": ' + nested(5_000) + "}", content_type="application/json")
    assert_refused(response, logs, CANARY)


LONE = "\ud800"
NOTE = {"scope": "user", "user": "u1", "text": "t"}
SURROGATE_CASES = [
    ("/api/v1/memories", NOTE | {"text": f"{CANARY}{LONE}"}, "text"),
    ("/api/v1/memories", NOTE | {"title": f"{CANARY}{LONE}"}, "title"),
    ("/api/v1/memories", NOTE | {"tags": [f"{CANARY}{LONE}"]}, "tags"),
    ("/api/v1/memories", NOTE | {"user": f"{CANARY}{LONE}"}, "user"),
    ("/api/v1/memories", NOTE | {"scope": "repository", "repository": f"{LONE}{CANARY}"}, "repository"),
    ("/api/v1/memories", NOTE | {"external_id": f"{CANARY}{LONE}"}, "external_id"),
    ("/api/v1/memories", NOTE | {"metadata": {"k": f"{CANARY}{LONE}"}}, "metadata"),
    ("/api/v1/memories", NOTE | {"metadata": {f"{CANARY}{LONE}": "v"}}, "metadata"),
    ("/api/v1/memories", NOTE | {"metadata": {"k": {"n": [f"{CANARY}\udfff"]}}}, "metadata"),
    ("/api/v1/memories/bulk", {"items": [NOTE | {"text": f"{CANARY}{LONE}"}]}, "items"),
    ("/api/v1/search", {"query": f"{CANARY}{LONE}", "user": "u1"}, "query"),
    ("/api/v1/tokens", {"name": f"{CANARY}{LONE}"}, "name"),
    ("/api/v1/proposals", {"repository": "web", "section": "## A", "addition": "x", "reasoning": f"{CANARY}{LONE}"},
     "reasoning"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "body", "field"), SURROGATE_CASES)
def test_it_answers_400_naming_the_field_for_a_lone_surrogate(api_client, logs, url, body, field):
    # json.dumps writes the lone surrogate as the escape "\ud800", as an attacker's client would.
    response = api_client.post(url, json.dumps(body), content_type="application/json")
    error = assert_refused(response, logs, CANARY)
    assert set(error["fields"]) == {field}


def test_it_answers_400_for_a_lone_surrogate_in_a_key_of_the_body(api_client, logs):
    body = json.dumps(NOTE | {f"{CANARY}{LONE}": 1})
    response = api_client.post("/api/v1/memories", body, content_type="application/json")
    assert set(assert_refused(response, logs, CANARY)["fields"]) == {"non_field_errors"}


def test_it_accepts_a_valid_surrogate_pair(api_client):
    body = json.dumps({"scope": "user", "user": "u1", "text": "emoji \U0001f600", "metadata": {"k": "\U0001f600"}})
    response = api_client.post("/api/v1/memories", body, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["text"] == "emoji \U0001f600"


def test_it_refuses_a_lone_surrogate_in_the_services_that_commands_and_mcp_call(tenant):
    from memory_service.exceptions import ValidationError
    from memory_service.memories.services import memory_create
    from proposals.services import proposal_file
    from tenants.access import Principal
    from tests.factories import make_token

    token = Principal.from_token(make_token(tenant, permissions=["memory:write", "proposals:write"]).token)
    with pytest.raises(ValidationError) as refused:
        memory_create(principal=token, scope="user", user="u1", text=f"{CANARY}{LONE}")
    assert refused.value.fields == {"text": [LONE_SURROGATE]} and CANARY not in refused.value.message
    with pytest.raises(ValidationError) as refused:
        proposal_file(principal=token, repository="web", section="## A", addition=f"{CANARY}{LONE}", reasoning="r")
    assert refused.value.fields == {"addition": [LONE_SURROGATE]}
