"""Invariant 2: no unmasked PII reaches the database, Redis, logs, error messages or exports.

Each input gets canary values of its own (an email, a phone number, a card number, a GitHub token)
and sends them through the real web server: memories (text, title, tags, metadata, solved_query),
bulk writes, edits, session notes, search queries, proposals, AGENTS.md imports, token names (REST
and the management commands), MCP tools, the command-line client's ``save-transcript`` (with and
without a model), the admin's forms and a refused request. No worker consumes meanwhile, so the
messages queued for it are read from Redis; then a worker drains them, and every text column of
the database, the broker's Redis database, the web and worker logs written meanwhile, every
response and command output, and an export archive are searched for each input's canaries in
every form ``tests.scan.leaked`` knows.
"""

import io
import json
import re
import threading
import zipfile
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.contrib.auth.hashers import make_password

from tenants.models import User
from tests.factories import make_tenant, make_token
from tests.leaks.helpers import (
    RUN,
    LeakScan,
    answered,
    answered_or_refused,
    canaries,
    refused,
    sentence,
    tool_answered,
    tool_refused,
)
from tests.scan import Haystack, free_text_arguments

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

PERMISSIONS = ["memory:read", "memory:write", "proposals:write", "export", "admin"]
ADMIN_PASSWORD = "a-Long-canary-passw0rd"
PROBE_REPOSITORY = "Leak-Probe-Repo"  # stored as given: the scan must find it in lower case too
INPUTS = [
    "rest memory", "rest bulk", "rest edit", "rest session note", "rest search", "rest proposal",
    "rest agents-md import", "rest refused", "rest token name email", "rest token name phone",
    "command create_token", "command create_tenant", "mcp add_note", "mcp search_memory",
    "mcp write_session_note", "mcp write_session_note name", "mcp propose_agents_md_update",
    "cli save-transcript", "cli save-transcript llm", "admin agents-md import", "admin agents-md upload",
    "admin proposal reject", "admin search",
]  # fmt: skip
FAILED_LOGIN = "admin login username"


def _memory(values: dict, **fields) -> dict:
    return {"scope": "repository", "repository": "r1", "user": "u1", "kind": "lesson", "text": sentence(values),
            "title": f"From {values['email']}", "tags": [values["phone"]],
            "metadata": {"reporter": values["email"], "card": values["card"]},
            "solved_query": f"why does {values['github token']} fail"} | fields  # fmt: skip


def _agents_md(values: dict) -> str:
    contacts = f"- {values['email']}, {values['phone']}\n- {values['card']} {values['github token']}\n"
    return f"# AGENTS.md\n\n## Contacts\n{contacts}"


def send_rest(scan: LeakScan) -> None:
    v = canaries("rest memory")
    created = scan.rest("rest memory", "POST", "/api/v1/memories", answered(201), json=_memory(v))
    scan.expect("rest memory", created.status_code == 201 and bool(created.json()["pii"]), "the write reports PII")
    v = canaries("rest bulk")
    bulk = scan.rest("rest bulk", "POST", "/api/v1/memories/bulk", answered(200, 207),
                     json={"items": [_memory(v, text=f"Bulk: {sentence(v)}")]})  # fmt: skip
    scan.expect("rest bulk", bulk.json()["results"][0]["status"] == 201, "the item is stored")
    v = canaries("rest edit")
    plain = {"scope": "repository", "repository": "r1", "text": "A plain lesson, edited later."}
    plain = scan.rest("rest edit", "POST", "/api/v1/memories", answered(201), json=plain)
    edited = ("text", "title", "tags", "metadata", "solved_query")
    edit = {key: value for key, value in _memory(v).items() if key in edited}
    scan.rest("rest edit", "PATCH", f"/api/v1/memories/{plain.json()['id']}", answered(200), json=edit)
    v = canaries("rest session note")
    note = {"text": f"Plan: {sentence(v)}", "user": "u1", "repository": "r1"}
    scan.rest("rest session note", "PUT", "/api/v1/sessions/s1/notes/plan", answered(201), json=note)
    v = canaries("rest search")
    query = " ".join(v.values())
    scan.rest("rest search", "POST", "/api/v1/search", answered(200), json={"query": query, "repository": "r1"})
    v = canaries("rest proposal")
    proposal = {"repository": "r1", "section": "### Always", "addition": f"Ask {v['email']} first",
                "reasoning": f"Because {v['phone']}, {v['card']} and {v['github token']}"}  # fmt: skip
    scan.rest("rest proposal", "POST", "/api/v1/proposals", answered(201), json=proposal)
    v = canaries("rest agents-md import")
    scan.rest("rest agents-md import", "PUT", "/api/v1/repositories/r1/agents-md", answered(201),
              content=_agents_md(v).encode(), headers={"Content-Type": "text/markdown"})  # fmt: skip
    v = canaries("rest refused")
    scan.rest("rest refused", "POST", "/api/v1/memories", refused("user"),
              json={"scope": "user", "user": v["email"], "text": sentence(v)})  # fmt: skip
    for label, key in (("rest token name email", "email"), ("rest token name phone", "phone")):
        name = f"bot {canaries(label)[key]}"
        issued = scan.rest(label, "POST", "/api/v1/tokens", answered_or_refused(201, "name"),
                           json={"name": name, "permissions": ["memory:read"]})  # fmt: skip
        if issued.status_code == 201:
            scan.use_token(label, issued.json()["token"])


def send_commands(scan: LeakScan, slug: str) -> None:
    for label, argv in (
        ("command create_token", ["create_token", slug, "--name", f"ci {canaries('command create_token')['email']}"]),
        ("command create_tenant", ["create_tenant", f"canary-command-{RUN}", "--token-name",
                                   f"ci {canaries('command create_tenant')['phone']}"]),
    ):  # fmt: skip
        done = scan.command(label, ["manage.py", *argv, "--json"])
        refusal = done.returncode != 0 and "name" in done.stderr
        scan.expect(label, done.returncode == 0 or refusal, f"issued, or refused naming 'name': {done.stderr[-300:]}")
        if done.returncode == 0:
            scan.use_token(label, json.loads(done.stdout)["token"])


def send_mcp(scan: LeakScan) -> None:
    note, search, session, named, proposal = (canaries(label) for label in (
        "mcp add_note", "mcp search_memory", "mcp write_session_note", "mcp write_session_note name",
        "mcp propose_agents_md_update"))  # fmt: skip
    scan.mcp([
        ("mcp add_note", "add_note", {"text": f"MCP: {sentence(note)}", "repository": "r1", "title": note["email"],
                                      "tags": [note["phone"]], "solved_query": note["github token"]}, tool_answered()),
        ("mcp search_memory", "search_memory", {"query": " ".join(search.values()), "repository": "r1"},
         tool_answered()),
        ("mcp write_session_note", "write_session_note", {"session": "s2", "name": "plan", "user": "u1",
                                                          "text": sentence(session)}, tool_answered()),
        ("mcp write_session_note name", "write_session_note", {"session": "s2", "name": named["email"], "user": "u1",
                                                               "text": sentence(named)}, tool_refused("name")),
        ("mcp propose_agents_md_update", "propose_agents_md_update", {
            "repository": "r1", "section": "### Never", "addition": f"Never mail {proposal['email']}",
            "reasoning": f"{proposal['phone']} {proposal['card']} {proposal['github token']}"}, tool_answered()),
    ])  # fmt: skip


class FakeModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint outside the service: replies with a fixed extraction."""

    reply: list = []
    requests: list = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        FakeModel.requests.append((self.path, body))
        answer = {"choices": [{"message": {"role": "assistant", "content": json.dumps(FakeModel.reply)}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def send_cli(scan: LeakScan, tmp_dir, token: str) -> None:
    env = {"MEMORY_SERVICE_URL": scan.base_url, "MEMORY_SERVICE_TOKEN": token, "MEMORY_SERVICE_REPOSITORY": "cli",
           "MEMORY_SERVICE_USER": "u1"}  # fmt: skip
    v = canaries("cli save-transcript")
    transcript = tmp_dir / "marked.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in [
        {"type": "user", "message": {"role": "user", "content": f"My mail is {v['email']}"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"LESSON: call {v['phone']} before paying with {v['card']}"},
            {"type": "text", "text": f"DECISION: rotate {v['github token']} and mail {v['email']}"}]}},
    ]))  # fmt: skip
    done = scan.command("cli save-transcript", ["-m", "memory_client", "save-transcript", str(transcript)],
                        env=env)  # fmt: skip
    scan.expect("cli save-transcript", done.returncode == 0 and '"stored": 2' in done.stdout, f"stored: {done.stdout}")

    v = canaries("cli save-transcript llm")
    FakeModel.reply = [
        {"kind": "lesson", "text": f"Mail {v['email']} or call {v['phone']} before deploys.", "priority": "high"},
        {"kind": "decision", "text": f"The card {v['card']} and token {v['github token']} are retired."},
    ]
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    transcript = tmp_dir / "chat.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": sentence(v)}))
    try:
        done = scan.command("cli save-transcript llm", ["-m", "memory_client", "save-transcript",
                                                        str(transcript)],
                            env=env | {"MEMORY_SERVICE_LLM_URL": f"http://127.0.0.1:{server.server_port}",
                                       "MEMORY_SERVICE_LLM_MODEL": "fake"})  # fmt: skip
    finally:
        server.shutdown()
    scan.expect("cli save-transcript llm", bool(FakeModel.requests), "the model was asked")
    scan.expect("cli save-transcript llm", done.returncode == 0 and '"stored": 2' in done.stdout,
                f"stored: {done.stdout} {done.stderr[-300:]}")  # fmt: skip


@contextmanager
def admin_client(base_url: str, username: str, password: str):
    """A browser-like client that posted the admin's login form, and the login's response."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        page = client.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        login = client.post("/admin/login/", data={"username": username, "password": password, "next": "/admin/",
                                                   "csrfmiddlewaretoken": csrf})  # fmt: skip
        yield client, login


def _form(client: httpx.Client, data: dict) -> dict:
    return data | {"csrfmiddlewaretoken": client.cookies["csrftoken"]}


def send_admin(scan: LeakScan, username: str) -> None:
    with admin_client(scan.base_url, username, ADMIN_PASSWORD) as (client, login):
        scan.expect("admin agents-md import", login.status_code == 302, f"logged in: {login.status_code}")
        v = canaries("admin agents-md import")
        form = {"repository": "admin-import", "text": _agents_md(v), "etag": ""}
        scan.rest("admin agents-md import", "POST", "/admin/proposals/agentsdocument/import/", answered(302),
                  http=client, data=_form(client, form))  # fmt: skip
        v = canaries("admin agents-md upload")
        scan.rest("admin agents-md upload", "POST", "/admin/proposals/agentsdocument/import/", answered(302),
                  http=client, data=_form(client, {"repository": "admin-upload", "text": "", "etag": ""}),
                  files={"file": ("AGENTS.md", _agents_md(v).encode(), "text/markdown")})  # fmt: skip
        v = canaries("admin proposal reject")
        plain = {"repository": "r1", "section": "### Always", "addition": "Reject me", "reasoning": "A plain reason."}
        filed = scan.rest("admin proposal reject", "POST", "/api/v1/proposals", answered(201), json=plain)
        proposal = filed.json()["id"]
        scan.rest("admin proposal reject", "POST", f"/admin/proposals/proposal/{proposal}/reject/", answered(302),
                  http=client, data=_form(client, {"note": f"No: {sentence(v)}"}))  # fmt: skip
        decided = scan.rest("admin proposal reject", "GET", f"/api/v1/proposals/{proposal}", answered(200))
        scan.expect("admin proposal reject", decided.json().get("status") == "rejected", "the proposal is rejected")
        v = canaries("admin search")
        # The search box shows the term searched for: the pages are not searched, where it went is.
        scan.rest("admin search", "GET", "/admin/memories/memory/", answered(200), http=client, keep=False,
                  params={"q": v["email"]})  # fmt: skip
        scan.rest("admin search", "GET", "/admin/audit/auditevent/", answered(200), http=client, keep=False,
                  params={"q": f"{v['phone']} {v['card']} {v['github token']}"})  # fmt: skip
    v = canaries(FAILED_LOGIN)
    with admin_client(scan.base_url, v["email"], f"wrong {v['github token']}") as (_, login):
        # The form shown again holds the username typed, as a browser's would.
        scan.expect(FAILED_LOGIN, login.status_code == 200, f"the login form again: {login.status_code}")


@pytest.fixture(scope="module")
def scan(live_server_url, django_db_blocker, tmp_path_factory):
    """Every input sent with the worker paused, the broker read, the worker run until drained, an
    export built and downloaded, then everything collected."""
    with django_db_blocker.unblock():
        tenant = make_tenant(f"canaries-{RUN}")
        token = make_token(tenant, name="canary-agent", permissions=PERMISSIONS).raw
        reviewer = User.objects.create(username="canary-reviewer", is_staff=True, tenant=tenant,
                                       password=make_password(ADMIN_PASSWORD, hasher="pbkdf2_sha256"))  # fmt: skip
    scan = LeakScan(base_url=live_server_url, token=token, tenant_id=tenant.id, django_db_blocker=django_db_blocker)
    # A digest stored first, so that the writes below queue its refresh (ids only, never text).
    scan.rest("rest context", "GET", "/api/v1/context", answered(200), params={"user": "u1", "repository": "r1"})
    scan.rest("probe", "POST", "/api/v1/memories", answered(201),
              json={"scope": "repository", "repository": PROBE_REPOSITORY, "text": "A probe of the scan."})  # fmt: skip
    send_rest(scan)
    send_commands(scan, tenant.slug)
    send_mcp(scan)
    send_cli(scan, tmp_path_factory.mktemp("transcripts"), token)
    send_admin(scan, reviewer.username)
    scan.rest("rest context", "GET", "/api/v1/context", answered(200), params={"user": "u1", "repository": "r1"})
    job = scan.rest("rest export", "POST", "/api/v1/exports", answered(202), json={}).json()["id"]
    scan.read_broker()
    with scan.worker():

        def exported() -> bool:
            status = scan.rest("rest export", "GET", f"/api/v1/exports/{job}").json()["status"]
            return status in ("succeeded", "failed")

        scan.wait_until_drained(done=exported)
        download = scan.rest("rest export", "GET", f"/api/v1/exports/{job}/download", answered(200))
    with zipfile.ZipFile(io.BytesIO(download.content)) as zipped:
        archive = b"\n".join(zipped.read(name) for name in zipped.namelist())
    scan.extra["export archive"] = Haystack(archive)
    scan.collect()
    return scan


@pytest.mark.parametrize("label", INPUTS)
def test_it_stores_no_canary_sent_through(scan, label):
    assert {"unmet": scan.unmet[label], "found": scan.where(canaries(label))} == {"unmet": [], "found": {}}


def test_it_keeps_no_username_of_a_failed_admin_login(scan):
    """A password typed into the username field, or an email address used as a username, is
    personal data too: the failed login must not keep it (the login throttle's records included)."""
    found = {"unmet": scan.unmet[FAILED_LOGIN], "found": scan.where(canaries(FAILED_LOGIN))}
    assert found == {"unmet": [], "found": {}}


def test_it_queues_only_ids_for_the_worker(scan):
    tasks = [message for message in scan.messages if message["task"]]
    names = {message["task"] for message in tasks}
    assert {"memory_service.memories.tasks.embed_memories_task", "memory_service.exports.tasks.export_build_task",
            "memory_service.session_context.tasks.refresh_session_context"} <= names  # fmt: skip
    assert {message["task"]: free_text_arguments(message) for message in tasks if free_text_arguments(message)} == {}
    every_canary = {f"{label}: {name}": value for label in INPUTS + [FAILED_LOGIN] for name, value in
                    canaries(label).items()}  # fmt: skip
    assert {place: names for place, names in scan.where(every_canary).items() if place.startswith("celery")} == {}


def test_the_scan_sees_what_the_service_stores(scan):
    """The places searched hold what the service did store: a scan of empty places proves nothing."""
    masked = scan.where({"pseudonym": "<EMAIL_ADDRESS_"})
    assert "database memories_memory.text" in masked and "export archive" in masked
    assert "database memories_memory.repository" in scan.where({"probe": PROBE_REPOSITORY.lower()})
    tenant = scan.where({"tenant": scan.tenant_id})
    assert "redis while queued" in tenant and any(place.startswith("celery message") for place in tenant)
    assert "log web.log" in scan.where({"token": scan.token.split(".")[0]})
    assert "log worker.log" in scan.where({"task": "embed_memories_task"})
    assert scan.unmet["rest context"] == [] and scan.unmet["rest export"] == [] and scan.unmet["probe"] == []
