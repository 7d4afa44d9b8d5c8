"""Invariant 2: no unmasked PII reaches the database, Redis, logs, error messages or exports.

Canary values go in through every input — memories (text, title, tags, metadata, solved_query),
bulk writes, edits, session notes, search queries, proposals, an AGENTS.md import, MCP tools and
a refused request — over the real web server and worker. Then the database (every text column),
the broker's Redis database, the web and worker logs written meanwhile, every response and the
export archive are searched for them.
"""

import io
import time
import zipfile

import httpx
import pytest
from django.conf import settings

from memory_service.memories.models import Memory
from tenants.context import tenant_context
from tests.conftest import log_file
from tests.factories import make_tenant, make_token
from tests.mcp.helpers import call
from tests.scan import database_occurrences, redis_dump

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

EMAIL = "canary.leak@example.org"
PHONE = "090-8765-4321"
CARD = "4111 1111 1111 1111"
GITHUB_TOKEN = "ghp_" + "C4nAry0123456789abcdefGHIJKLMNOPqrst"
CANARIES = {"email": EMAIL, "phone": PHONE, "card": CARD, "github token": GITHUB_TOKEN}
ALL = f"Mail {EMAIL}, call {PHONE}, card {CARD}, token {GITHUB_TOKEN}."


def _leaks(data: bytes | str) -> list[str]:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    return [name for name, value in CANARIES.items() if value in text or value.replace(" ", "") in text]


def _wait_for(predicate, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_canaries_sent_through_every_input_are_stored_nowhere(live_server_url, celery_worker_process):
    logs = {name: log_file(name) for name in ("web.log", "worker.log")}
    offsets = {name: path.stat().st_size if path.exists() else 0 for name, path in logs.items()}
    tenant = make_tenant("canaries")
    token = make_token(tenant, permissions=["memory:read", "memory:write", "proposals:write", "export", "admin"]).raw
    http = httpx.Client(base_url=live_server_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    responses = []

    def send(method, path, **kwargs):
        response = http.request(method, path, **kwargs)
        responses.append(response)
        return response

    memory = {"scope": "repository", "repository": "r1", "user": "u1", "kind": "lesson", "text": ALL,
              "title": f"From {EMAIL}", "tags": [PHONE], "metadata": {"reporter": EMAIL, "card": CARD},
              "solved_query": f"why does {GITHUB_TOKEN} fail"}  # fmt: skip
    created = send("POST", "/api/v1/memories", json=memory)
    assert created.status_code == 201 and created.json()["pii"]
    bulk = send("POST", "/api/v1/memories/bulk", json={"items": [memory | {"text": f"Bulk: {ALL}"}]})
    assert bulk.json()["results"][0]["status"] == 201
    assert send("PATCH", f"/api/v1/memories/{created.json()['id']}", json={"text": f"Edited: {ALL}"}).status_code == 200
    note = {"text": f"Plan: {ALL}", "user": "u1", "repository": "r1"}
    assert send("PUT", "/api/v1/sessions/s1/notes/plan", json=note).status_code == 201
    assert send("POST", "/api/v1/search", json={"query": f"{EMAIL} {PHONE}", "repository": "r1"}).status_code == 200
    proposal = {"repository": "r1", "section": "### Always", "addition": f"Ask {EMAIL} first",
                "reasoning": f"Because {PHONE} and {GITHUB_TOKEN}"}  # fmt: skip
    assert send("POST", "/api/v1/proposals", json=proposal).status_code == 201
    agents_md = f"# AGENTS.md\n\n## Contacts\n- {EMAIL}, {PHONE}\n"
    imported = send("PUT", "/api/v1/repositories/r1/agents-md", content=agents_md.encode(),
                    headers={"Content-Type": "text/markdown"})  # fmt: skip
    assert imported.status_code == 201
    refused = send("POST", "/api/v1/memories", json={"scope": "user", "user": EMAIL, "text": ALL})
    assert refused.status_code == 400
    error, _ = call(f"{live_server_url}/mcp/", token, "add_note", {"text": f"MCP: {ALL}", "repository": "r1"})
    assert error is False
    error, _ = call(f"{live_server_url}/mcp/", token, "search_memory", {"query": EMAIL, "repository": "r1"})
    assert error is False
    assert send("GET", "/api/v1/context", params={"user": "u1", "repository": "r1"}).status_code == 200

    job = send("POST", "/api/v1/exports", json={}).json()["id"]
    _wait_for(lambda: send("GET", f"/api/v1/exports/{job}").json()["status"] in ("succeeded", "failed"), 120)
    archive = send("GET", f"/api/v1/exports/{job}/download")
    assert archive.status_code == 200
    with zipfile.ZipFile(io.BytesIO(archive.content)) as zipped:
        contents = b"\n".join(zipped.read(name) for name in zipped.namelist())
    assert b"<EMAIL_ADDRESS>" in contents  # the masked text is there; the values are not

    _wait_for(lambda: _pending(tenant) == 0)  # the worker has read and embedded every memory
    assert {name: _leaks(r.content) for name, r in enumerate(responses) if _leaks(r.content)} == {}
    assert "memories_memory.text" in database_occurrences("<EMAIL_ADDRESS>")  # the scan sees the masked rows
    for name, value in CANARIES.items():
        assert database_occurrences(value) == [], name
    redis_contents = redis_dump(settings.REDIS_URL)
    assert redis_contents  # the broker and the locks live there
    assert _leaks(redis_contents) == []
    for name, path in logs.items():
        with open(path, "rb") as log:
            log.seek(offsets[name])
            written = log.read()
        assert written, f"nothing was logged to {name}"
        assert _leaks(written) == [], name
    assert _leaks(contents) == []


def _pending(tenant) -> int:
    with tenant_context(tenant.id):
        return Memory.objects.filter(embedding_status="pending").count()
