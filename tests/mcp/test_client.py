"""The command-line client and the stdio bridge, as hooks and stdio MCP clients run them."""

import asyncio
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import client_for
from tests.factories import as_labels, make_tenant, make_token

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]


@pytest.fixture
def token():
    return make_token(make_tenant("acme"), permissions=["memory:read", "memory:write"]).raw


def cli(live_server_url, token, *args, stdin=None, env=None, cwd=None):
    settings = {"MEMORY_SERVICE_URL": live_server_url, "MEMORY_SERVICE_TOKEN": token}
    settings |= {"MEMORY_SERVICE_REPOSITORY": "r1", "MEMORY_SERVICE_USER": "u1"}
    environment = os.environ | settings | (env or {})
    if "MEMORY_SERVICE_LLM_URL" not in (env or {}):
        environment.pop("MEMORY_SERVICE_LLM_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "memory_client", *args], input=stdin, capture_output=True, text=True,
        env=environment, timeout=120, cwd=cwd,
    )  # fmt: skip


def test_it_bridges_stdio_to_the_service(live_server_url, token):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_client", "mcp"],
        env={"MEMORY_SERVICE_URL": live_server_url, "MEMORY_SERVICE_TOKEN": token, "PATH": os.environ["PATH"]},
    )

    async def run():
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            added = await client.call_tool("add_note", {"text": "bridged note about retries", "repository": "r1"})
            return tools, added

    tools, added = asyncio.run(run())
    assert {"search_memory", "add_note", "list_decisions"} <= tools
    assert added.is_error is False
    listed = client_for(token).get("/api/v1/memories", {"repository": "r1"}).json()["results"]
    assert [m["text"] for m in listed] == ["bridged note about retries"]


def test_it_refuses_the_bridge_without_a_token(live_server_url):
    result = cli(live_server_url, "", "mcp")
    assert result.returncode == 1 and "MEMORY_SERVICE_TOKEN" in result.stderr


def test_it_notes_searches_and_prints_or_writes_the_context(live_server_url, token, tmp_path):
    noted = cli(live_server_url, token, "note", "Always run migrations before deploy", "--kind", "lesson")
    assert noted.returncode == 0, noted.stderr
    assert json.loads(noted.stdout)["pii"] == {}
    found = cli(live_server_url, token, "search", "migrations deploy")
    assert found.returncode == 0 and "Always run migrations before deploy" in found.stdout
    context = cli(live_server_url, token, "context")
    assert context.returncode == 0 and "## Latest lessons and conclusions" in context.stdout
    target = tmp_path / "memories" / "session_context.md"
    written = cli(live_server_url, token, "context", "--write", str(target))
    assert written.returncode == 0 and "Always run migrations" in target.read_text()


def test_note_files_by_kind_unless_a_scope_is_given(live_server_url, token, tmp_path):
    def scope_of(*args, env=None, cwd=None):
        noted = cli(live_server_url, token, "note", *args, env=env, cwd=cwd)
        assert noted.returncode == 0, noted.stderr
        stored = client_for(token).get(f"/api/v1/memories/{json.loads(noted.stdout)['id']}").json()
        return stored["scope"], stored["user"], stored["repository"]

    assert scope_of("prefers terse answers", "--kind", "preference") == ("user", "u1", "")
    assert scope_of("restart workers after deploy", "--kind", "lesson") == ("repository", "", "r1")
    assert scope_of("prefers tabs", "--kind", "preference", "--scope", "repository") == ("repository", "", "r1")
    outside = {"MEMORY_SERVICE_REPOSITORY": ""}  # and run outside any git repository
    assert scope_of("check the logs first", "--kind", "lesson", env=outside, cwd=tmp_path) == ("user", "u1", "")


def test_it_saves_marked_lines_of_a_transcript_without_a_model(live_server_url, token, tmp_path):
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in [
        {"type": "user", "message": {"role": "user", "content": "please fix the flaky test"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Fixed.\nLESSON: the flaky test needed a fixed clock"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": "DECISION: freeze time in all tests"}},
    ]))  # fmt: skip
    hook_input = json.dumps({"transcript_path": str(transcript), "session_id": "abc"})
    saved = cli(live_server_url, token, "save-transcript", "-", stdin=hook_input)
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout) == {"stored": 2, "already_known": 0, "failed": 0}
    again = cli(live_server_url, token, "save-transcript", str(transcript))
    assert json.loads(again.stdout) == {"stored": 0, "already_known": 2, "failed": 0}
    kinds = sorted(m["kind"] for m in client_for(token).get("/api/v1/memories").json()["results"])
    assert kinds == ["decision", "lesson"]


class _ChatCompletions(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint standing in for the operator's model (outside the system)."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        reply = json.dumps([
            {"kind": "preference", "text": "The user prefers tabs; contact tabs-fan@example.com", "priority": "normal"},
            {"kind": "lesson", "text": "Do not mock the database in tests", "priority": "high"},
            {"kind": "shopping", "text": "not a memory kind"},
        ])  # fmt: skip
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_it_extracts_memories_with_a_configured_model_masked_and_raw(live_server_url, token, tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _ChatCompletions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    transcript = tmp_path / "t.txt"
    transcript.write_text("user: use tabs please\nassistant: ok")
    try:
        saved = cli(live_server_url, token, "save-transcript", str(transcript),
                    env={"MEMORY_SERVICE_LLM_URL": f"http://127.0.0.1:{server.server_port}",
                         "MEMORY_SERVICE_LLM_MODEL": "any"})  # fmt: skip
    finally:
        server.shutdown()
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout) == {"stored": 2, "already_known": 0, "failed": 0}
    memories = client_for(token).get("/api/v1/memories").json()["results"]
    by_kind = {m["kind"]: m for m in memories}
    assert as_labels(by_kind["preference"]["text"]) == "The user prefers tabs; contact <EMAIL_ADDRESS>"
    assert by_kind["lesson"]["priority"] == "high"
    assert {m["confidence"] for m in memories} == {"raw"}
