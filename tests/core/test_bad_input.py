"""Hostile input is a 4xx in the one error shape, never a 500, and the submitted value appears
neither in the response nor in any log record."""

import base64
import logging

import pytest

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
