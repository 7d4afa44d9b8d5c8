"""Hostile input over the real MCP streamable-HTTP path: a 4xx or a tool error that names the
argument, never a crash, and the submitted value neither in the answer nor in the server's log."""

import json

import httpx
import pytest

from memory_service.inputs import MAX_JSON_DEPTH
from tests.conftest import client_for, log_file
from tests.factories import make_tenant, make_token
from tests.mcp.helpers import call

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

CANARY = "CANARY-mcp-5be2"
MODERN = "2026-07-28"  # the SDK routes a request of this protocol version through its other parser


@pytest.fixture
def acme():
    tenant = make_tenant("acme")
    return tenant, make_token(tenant, permissions=["memory:read", "memory:write"]).raw


def stored_texts(token: str) -> list[str]:
    return [memory["text"] for memory in client_for(token).get("/api/v1/memories").json()["results"]]


class ServerLog:
    """What the live server logs from now on."""

    def __init__(self):
        self.path = log_file("web.log")
        self.start = self.path.stat().st_size if self.path.exists() else 0

    def text(self) -> str:
        return self.path.read_bytes()[self.start :].decode("utf-8", "replace")


def post_tool_call(url: str, token: str, tool: str, arguments: str, *, modern: bool) -> httpx.Response:
    """POST a tools/call whose ``arguments`` are the given raw JSON text, as the SDK's legacy or modern
    path receives it."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}  # fmt: skip
    meta = ""
    if modern:
        headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
        envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        meta = f'"_meta": {json.dumps(envelope)}, '
    params = f'{{{meta}"name": "{tool}", "arguments": {arguments}}}'
    body = f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {params}}}'
    return httpx.post(url, content=body.encode(), headers=headers, timeout=30)


def assert_refused(response: httpx.Response, log: ServerLog, status: int = 400) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"}
    assert CANARY not in response.text and CANARY not in log.text()
    return error


@pytest.mark.parametrize("modern", [False, True])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 500, 5_000])
def test_it_answers_400_for_tool_arguments_nested_deeper_than_the_limit(live_server_url, acme, modern, depth):
    log = ServerLog()
    nested = "[" * depth + json.dumps(CANARY) + "]" * depth
    response = post_tool_call(f"{live_server_url}/mcp/", acme[1], "add_note",
                              f'{{"text": "ok", "repository": "r1", "tags": {nested}}}', modern=modern)  # fmt: skip
    error = assert_refused(response, log)
    assert str(MAX_JSON_DEPTH) in error["message"]
    assert stored_texts(acme[1]) == []


@pytest.mark.parametrize("modern", [False, True])
@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (f'{{"text": "{CANARY}\\ud800", "repository": "r1"}}', "text"),
        (f'{{"text": "ok", "repository": "r1", "tags": ["{CANARY}\\udc00"]}}', "tags"),
        (f'{{"text": "ok", "repository": "r1", "title": "\\ud800{CANARY}"}}', "title"),
    ],
)
def test_it_answers_400_naming_the_argument_for_a_lone_surrogate(live_server_url, acme, modern, arguments, field):
    log = ServerLog()
    response = post_tool_call(f"{live_server_url}/mcp/", acme[1], "add_note", arguments, modern=modern)
    assert assert_refused(response, log)["fields"] == {field: ["Contains a lone surrogate (\\ud800-\\udfff), "
                                                               "which is not a character."]}  # fmt: skip
    assert stored_texts(acme[1]) == []


def test_it_still_stores_a_valid_surrogate_pair_over_mcp(live_server_url, acme):
    response = post_tool_call(f"{live_server_url}/mcp/", acme[1], "add_note",
                              '{"text": "emoji \\ud83d\\ude00", "repository": "r1"}', modern=True)  # fmt: skip
    assert response.status_code == 200 and response.json()["result"]["isError"] is False
    assert stored_texts(acme[1]) == ["emoji \U0001f600"]


def test_it_answers_413_for_an_mcp_body_over_the_size_limit(live_server_url, acme):
    # The live server runs with the default MAX_REQUEST_BYTES (8 MiB).
    log = ServerLog()
    text = CANARY + "x" * (8 * 1024 * 1024)
    response = post_tool_call(f"{live_server_url}/mcp/", acme[1], "add_note",
                              json.dumps({"text": text, "repository": "r1"}), modern=False)  # fmt: skip
    assert assert_refused(response, log, status=413)["code"] == "too_large"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("add_note", {"text": 5, "repository": "r1", "title": [CANARY]},
         {"text": "Input should be a valid string", "title": "Input should be a valid string"}),
        ("add_note", {"text": "ok", "repository": "r1", "tags": ["fine", {"k": CANARY}]},
         {"tags.1": "Input should be a valid string"}),
        ("search_memory", {"query": "q", "repository": "r1", "top": 987654321},
         {"top": "Input should be less than or equal to 50"}),
        ("search_memory", {"query": "q", "repository": "r1", "budget_bytes": f"{CANARY}"},
         {"budget_bytes": "Input should be a valid integer, unable to parse string as an integer"}),
        ("supersede_memory", {"memory_id": "x", "by": "y", "partial": CANARY},
         {"partial": "Input should be a valid boolean, unable to interpret input"}),
        ("write_session_note", {"session": "s1", "text": CANARY}, {"name": "Field required"}),
    ],
)  # fmt: skip
def test_it_names_the_wrong_argument_and_why_but_never_its_value(live_server_url, acme, tool, arguments, expected):
    log = ServerLog()
    error, message = call(f"{live_server_url}/mcp/", acme[1], tool, arguments)
    assert error is True
    for argument, why in expected.items():
        assert f"{argument}: {why}" in message
    assert CANARY not in message and "987654321" not in message and "input_value" not in message
    assert CANARY not in log.text() and "987654321" not in log.text()
    assert stored_texts(acme[1]) == []


def test_it_words_argument_errors_the_same_on_the_older_protocol_path(live_server_url, acme):
    response = post_tool_call(f"{live_server_url}/mcp/", acme[1], "add_note",
                              f'{{"text": ["{CANARY}"], "repository": "r1"}}', modern=False)  # fmt: skip
    result = response.json()["result"]
    assert result["isError"] is True
    assert "text: Input should be a valid string" in result["content"][0]["text"] and CANARY not in response.text
