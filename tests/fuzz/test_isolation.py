"""Tenant and user isolation under random sequences of operations (hypothesis, stateful).

Three fresh tenants per example, each with five tokens: one with every permission, two bound to a
user, one bound to a repository, one bound to both. Random REST calls and MCP tool calls write,
read, search, edit, delete and supersede memories, file proposals and import AGENTS.md — naming
ids of other tenants and other users as often as their own. Every text written carries a unique
marker (``canary-<run><tenant>-<owner>-<n>``) whose owner the test records. After every response:

- no body contains a marker the calling token may not read: another tenant's, another user's
  user-scope or session memory (for a token bound to a user), a memory of a repository the token
  is not bound to, a proposal the token did not file (unless it is an admin token);
- the status is the one the model predicts (200 only for what the token may read, 404 for the
  rest — never 403, which would reveal existence; 403 for naming another user or repository);
- what a write returned 2xx for is then readable by its writer, and a full listing of memories is
  exactly the memories the token may read.
"""

import asyncio
import itertools
import json
import re
import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError

from memory_service.mcp_server.server import build_server
from tests.conftest import ALL_PERMISSIONS, client_for
from tests.factories import make_tenant, make_token

TENANTS = ("t0", "t1", "t2")
USERS = ("u1", "u2", "u3")
REPOS = ("r1", "r2")
SESSIONS = ("s1", "s2")
AGENT = ["memory:read", "memory:write", "proposals:write"]
# key → (bound user, bound repositories, permissions)
TOKENS = {
    "admin": ("", [], ALL_PERMISSIONS),
    "u1": ("u1", [], AGENT),
    "u2": ("u2", [], AGENT),
    "r1": ("", ["r1"], AGENT),
    "u1r2": ("u1", ["r2"], AGENT),
}
MARKER_RE = re.compile(r"canary-[a-z0-9]+-[a-z0-9]+-\d+")
_runs = itertools.count(1)

user_arg = st.sampled_from(("",) + USERS)
repo_arg = st.sampled_from(("",) + REPOS)
session_arg = st.sampled_from(("",) + SESSIONS)


@dataclass(frozen=True)
class Actor:
    key: str
    tenant: str
    user: str
    repositories: tuple[str, ...]
    admin: bool
    raw: str = field(repr=False)


@dataclass(frozen=True)
class Canary:
    """Who may read the thing that carries a marker."""

    tenant: str
    what: str  # memory | proposal | agents_md
    scope: str = ""
    user: str = ""
    repository: str = ""
    session: str = ""


@dataclass
class Written:
    """A memory the model knows: its owner and its current marker."""

    canary: Canary
    marker: str
    deleted: bool = False


_mcp_server = None


def mcp_call(raw: str, tool: str, arguments: dict) -> tuple[bool, object]:
    """Call an MCP tool in process, as the streamable-HTTP transport would after authenticating
    ``raw``: the same server object, tool argument validation and token-to-tenant path."""
    global _mcp_server
    if _mcp_server is None:
        _mcp_server = build_server()

    async def run():
        access = AccessToken(token=raw, client_id="fuzz", scopes=[])
        reset = auth_context_var.set(AuthenticatedUser(access))
        try:
            return await _mcp_server.call_tool(tool, arguments)
        finally:
            auth_context_var.reset(reset)

    try:
        result = asyncio.run(run())
    except ToolError as exc:
        return True, str(exc)
    if result.structured_content is not None and not result.is_error:
        payload = result.structured_content
        return False, payload.get("result", payload) if set(payload) == {"result"} else payload
    text = "".join(getattr(block, "text", "") for block in result.content)
    try:
        return bool(result.is_error), json.loads(text)
    except ValueError:
        return bool(result.is_error), text


class IsolationMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.run = next(_runs)
        self.n = itertools.count(1)
        self.actors: list[Actor] = []
        for tenant_key in TENANTS:
            tenant = make_tenant(f"iso-{self.run}-{tenant_key}")
            for key, (user, repositories, permissions) in TOKENS.items():
                raw = make_token(tenant, name=key, permissions=permissions, user=user, repositories=repositories).raw
                self.actors.append(Actor(key, tenant_key, user, tuple(repositories), "admin" in permissions, raw))
        self.clients = {actor: client_for(actor.raw) for actor in self.actors}
        self.canaries: dict[str, Canary] = {}
        self.memories: dict[str, Written] = {}  # id → what the model knows
        self.notes: dict[tuple, str] = {}  # (tenant, user, session, name) → memory id
        self.proposals: dict[str, str] = {}  # id → marker
        self.filers: dict[str, set[str]] = {}  # proposal marker → keys of the tokens that filed it
        self.agents_md: dict[tuple[str, str], str] = {}  # (tenant, repository) → current ETag

    # -- the model ---------------------------------------------------------------------------

    def marker(self, canary: Canary) -> str:
        owner = canary.user or canary.repository or "none"
        marker = f"canary-e{self.run}{canary.tenant}-{owner}-{next(self.n)}"
        self.canaries[marker] = canary
        return marker

    @staticmethod
    def may_read(actor: Actor, canary: Canary, filers: set[str] = frozenset()) -> bool:
        if canary.tenant != actor.tenant:
            return False
        repository_ok = not actor.repositories or canary.repository in actor.repositories
        if canary.what == "proposal":
            return (actor.admin or actor.key in filers) and repository_ok
        if canary.what == "agents_md":
            return repository_ok
        # The table of DESIGN.md "Permissions", written out here, not imported from the service.
        if canary.scope == "repository":
            return repository_ok
        if actor.user:  # user and session scope: the bound user's own only
            return canary.user == actor.user
        return not actor.repositories  # a repository-only token never reads user or session scope

    def may_supersede(self, old_id: str, new_id: str) -> bool:
        """A memory is replaced only by another one at least as visible: a repository memory by the
        same repository's, a user's or session memory by the same user's or by a repository memory."""
        old, new = self.memories[old_id].canary, self.memories[new_id].canary
        if old_id == new_id:
            return False
        if old.scope == "repository":
            return new.scope == "repository" and new.repository == old.repository
        if new.scope == "repository":
            return True
        return new.user == old.user and (new.scope == "user" or old.scope == "session")

    def readable(self, actor: Actor, memory_id: str) -> bool:
        known = self.memories.get(memory_id)
        return known is not None and not known.deleted and self.may_read(actor, known.canary)

    def may_read_proposal(self, actor: Actor, proposal_id: str) -> bool:
        marker = self.proposals.get(proposal_id)
        return marker is not None and self.may_read(actor, self.canaries[marker], self.filers[marker])

    def check_body(self, actor: Actor, body: str, what: str) -> None:
        """The invariant: nothing in a response the token may not read."""
        for marker in MARKER_RE.findall(body):
            canary = self.canaries.get(marker)
            assert canary is not None, f"{what}: unknown marker {marker} shown to {actor}"
            assert self.may_read(actor, canary, self.filers.get(marker, set())), (
                f"{what}: {marker} ({canary}) shown to {actor}"
            )

    @staticmethod
    def names_forbidden(actor: Actor, *, scope: str = "", user: str = "", repository: str = "", session: str = ""):
        """Whether a request naming these ids or this scope is a 403 for ``actor``."""
        repository_only = bool(actor.repositories) and not actor.user
        return bool(
            (actor.user and user and user != actor.user)
            or (actor.repositories and repository and repository not in actor.repositories)
            or (repository_only and (user or session or scope in ("user", "session")))
        )

    def owner(self, actor: Actor, scope: str, user: str, repository: str, session: str):
        """(status, canary) the service must answer for a write naming these ids."""
        if self.names_forbidden(actor, scope=scope, user=user, repository=repository, session=session):
            return 403, None
        user = user or actor.user
        needed = {"user": user, "repository": repository, "session": session and user}[scope]
        if not needed:
            return 400, None
        if scope == "user":
            return 201, Canary(actor.tenant, "memory", "user", user)
        if scope == "repository":
            return 201, Canary(actor.tenant, "memory", "repository", repository=repository)
        return 201, Canary(actor.tenant, "memory", "session", user, repository, session)

    # -- requests ---------------------------------------------------------------------------

    def send(self, actor: Actor, method: str, url: str, body=None, **kwargs):
        client = self.clients[actor]
        if method == "get":
            response = client.get(url, body or {}, **kwargs)
        else:
            response = getattr(client, method)(url, body, format="json", **kwargs)
        note(f"{actor.tenant}/{actor.key} {method.upper()} {url} {body or ''} → {response.status_code}")
        assert response.status_code < 500, response.content
        self.check_body(actor, response.content.decode(), f"{method.upper()} {url}")
        return response

    def mcp(self, actor: Actor, tool: str, arguments: dict):
        is_error, payload = mcp_call(actor.raw, tool, arguments)
        note(f"{actor.tenant}/{actor.key} MCP {tool} {arguments} → {'error' if is_error else 'ok'}")
        self.check_body(actor, json.dumps(payload), f"MCP {tool}")
        return is_error, payload

    def any_memory_id(self, data) -> str:
        ids = sorted(self.memories) + [str(uuid.uuid4())]
        return data.draw(st.sampled_from(ids), label="memory id")

    def record_write(self, actor: Actor, memory: dict, canary: Canary, marker: str) -> None:
        assert (memory["scope"], memory["user"], memory["repository"], memory["session"]) == (
            canary.scope, canary.user, canary.repository, canary.session
        )  # fmt: skip
        self.memories[memory["id"]] = Written(canary, marker)
        read = self.send(actor, "get", f"/api/v1/memories/{memory['id']}")
        assert read.status_code == 200 and marker in read.json()["text"], "a 2xx write is readable by its writer"

    def draw_memory(self, data, actor: Actor):
        scope = data.draw(st.sampled_from(("user", "repository", "session")), label="scope")
        ids = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        status, canary = self.owner(actor, scope, **ids)
        marker = self.marker(canary) if canary else f"canary-e{self.run}{actor.tenant}-none-{next(self.n)}"
        if canary is None:  # refused: whoever might see it, it must never be stored
            self.canaries[marker] = Canary("nobody", "memory")
        kind = data.draw(st.sampled_from(("note", "lesson", "decision")), label="kind")
        body = {"scope": scope, "kind": kind, "text": f"Remember {marker} when deploying", "title": marker} | {
            k: v for k, v in ids.items() if v
        }
        return body, status, canary, marker

    # -- REST rules ---------------------------------------------------------------------------

    @rule(data=st.data())
    def create_memory(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        body, status, canary, marker = self.draw_memory(data, actor)
        response = self.send(actor, "post", "/api/v1/memories", body)
        assert response.status_code == status
        if status == 201:
            self.record_write(actor, response.json(), canary, marker)

    @rule(data=st.data())
    def bulk_create(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        items = [self.draw_memory(data, actor) for _ in range(data.draw(st.integers(1, 3), label="items"))]
        response = self.send(actor, "post", "/api/v1/memories/bulk", {"items": [item[0] for item in items]})
        assert response.status_code == 200
        for (_body, status, canary, marker), result in zip(items, response.json()["results"], strict=True):
            assert result["status"] == status
            if status == 201:
                self.record_write(actor, result["memory"], canary, marker)

    @rule(data=st.data())
    def list_memories(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        filters = data.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "scope": st.sampled_from(("user", "repository", "session")),
                    "user": st.sampled_from(USERS),
                    "repository": st.sampled_from(REPOS),
                    "session": st.sampled_from(SESSIONS),
                },
            ),
            label="filters",
        )
        response = self.send(actor, "get", "/api/v1/memories", filters | {"limit": 200})
        forbidden = self.names_forbidden(actor, **filters)
        assert response.status_code == (403 if forbidden else 200)
        if response.status_code == 200 and not filters:
            listed = {m["id"] for m in response.json()["results"]}
            assert listed == {i for i in self.memories if self.readable(actor, i)}

    @rule(data=st.data())
    def get_memory(self, data):
        actor, memory_id = data.draw(st.sampled_from(self.actors), label="actor"), self.any_memory_id(data)
        response = self.send(actor, "get", f"/api/v1/memories/{memory_id}")
        assert response.status_code == (200 if self.readable(actor, memory_id) else 404)
        if response.status_code == 200:
            assert self.memories[memory_id].marker in response.json()["text"]

    @rule(data=st.data())
    def patch_memory(self, data):
        actor, memory_id = data.draw(st.sampled_from(self.actors), label="actor"), self.any_memory_id(data)
        known = self.memories.get(memory_id)
        marker = self.marker(known.canary) if known else f"canary-e{self.run}{actor.tenant}-none-{next(self.n)}"
        self.canaries.setdefault(marker, Canary("nobody", "memory"))
        readable = self.readable(actor, memory_id)
        response = self.send(actor, "patch", f"/api/v1/memories/{memory_id}", {"text": f"Edited: {marker}"})
        assert response.status_code == (200 if readable else 404)
        if readable:
            known.marker = marker

    @rule(data=st.data())
    def delete_memory(self, data):
        actor, memory_id = data.draw(st.sampled_from(self.actors), label="actor"), self.any_memory_id(data)
        readable = self.readable(actor, memory_id)
        response = self.send(actor, "delete", f"/api/v1/memories/{memory_id}")
        assert response.status_code == (204 if readable else 404)
        if readable:
            self.memories[memory_id].deleted = True
        elif memory_id in self.memories and not self.memories[memory_id].deleted:
            owner = next(a for a in self.actors if a.tenant == self.memories[memory_id].canary.tenant and a.admin)
            assert self.send(owner, "get", f"/api/v1/memories/{memory_id}").status_code == 200, (
                "a refused delete deleted"
            )

    @rule(data=st.data())
    def supersede(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        old, new = self.any_memory_id(data), self.any_memory_id(data)
        response = self.send(actor, "post", f"/api/v1/memories/{old}/supersede", {"by": new})
        if not (self.readable(actor, old) and self.readable(actor, new)):
            assert response.status_code == 404
        else:
            assert response.status_code == (200 if self.may_supersede(old, new) else 400)

    @rule(data=st.data())
    def search(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        markers = sorted(m for m, c in self.canaries.items() if c.what == "memory") or ["deploying"]
        query = data.draw(st.sampled_from(markers + ["deploying", "Remember"]), label="query")
        where = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        response = self.send(actor, "post", "/api/v1/search", {"query": query} | where)
        assert response.status_code in (200, 400, 403)

    @rule(data=st.data())
    def session_note(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        session, name = data.draw(st.sampled_from(SESSIONS)), data.draw(st.sampled_from(("plan", "todo")))
        user, repository = data.draw(user_arg), data.draw(repo_arg)
        status, canary = self.owner(actor, "session", user, repository, session)
        existing = self.notes.get((actor.tenant, canary.user, session, name)) if canary else None
        if existing is not None and not self.memories[existing].deleted:
            canary = self.memories[existing].canary  # an overwrite keeps the note's owner
            status = 200 if self.readable(actor, existing) else 404
        marker = self.marker(canary) if canary else f"canary-e{self.run}{actor.tenant}-none-{next(self.n)}"
        self.canaries.setdefault(marker, Canary("nobody", "memory"))
        body = (
            {"text": f"Plan: {marker}"}
            | ({"user": user} if user else {})
            | ({"repository": repository} if repository else {})
        )
        if data.draw(st.booleans(), label="over MCP"):
            is_error, payload = self.mcp(actor, "write_session_note", body | {"session": session, "name": name})
            assert is_error == (status >= 400), payload
            if not is_error:
                assert payload["created"] == (status == 201)
                memory = self.send(actor, "get", f"/api/v1/memories/{payload['id']}").json()
        else:
            response = self.send(actor, "put", f"/api/v1/sessions/{session}/notes/{name}", body)
            assert response.status_code == status
            memory = response.json()
        if status == 201:
            self.notes[(actor.tenant, canary.user, session, name)] = memory["id"]
            self.record_write(actor, memory, canary, marker)
        elif status == 200:
            self.memories[existing].marker = marker

    @rule(data=st.data())
    def decisions_and_context(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        repository = data.draw(st.sampled_from(REPOS))
        response = self.send(actor, "get", "/api/v1/decisions", {"repository": repository, "limit": 200})
        assert response.status_code == (403 if actor.repositories and repository not in actor.repositories else 200)
        where = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        response = self.send(actor, "get", "/api/v1/context", {k: v for k, v in where.items() if v})
        assert response.status_code in (200, 400, 403)

    @rule(data=st.data())
    def file_proposal(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        repository = data.draw(st.sampled_from(REPOS))
        canary = Canary(actor.tenant, "proposal", repository=repository)
        marker = self.marker(canary)
        self.filers[marker] = {actor.key}
        body = {"repository": repository, "section": "### Always", "addition": f"Check {marker}", "reasoning": marker}
        forbidden = bool(actor.repositories) and repository not in actor.repositories
        if data.draw(st.booleans(), label="over MCP"):
            is_error, payload = self.mcp(actor, "propose_agents_md_update", body)
            assert is_error == forbidden, payload
            filed = None if is_error else payload["id"]
        else:
            response = self.send(actor, "post", "/api/v1/proposals", body)
            assert response.status_code == (403 if forbidden else 201)
            filed = response.json()["id"] if response.status_code == 201 else None
        if filed:
            self.proposals[filed] = marker

    @rule(data=st.data())
    def read_proposals(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        response = self.send(actor, "get", "/api/v1/proposals", {"limit": 200})
        assert response.status_code == 200
        listed = {p["id"] for p in response.json()["results"]}
        assert listed == {i for i in self.proposals if self.may_read_proposal(actor, i)}
        proposal_id = data.draw(st.sampled_from(sorted(self.proposals) + [str(uuid.uuid4())]), label="proposal")
        response = self.send(actor, "get", f"/api/v1/proposals/{proposal_id}")
        assert response.status_code == (200 if self.may_read_proposal(actor, proposal_id) else 404)

    @rule(data=st.data())
    def agents_md(self, data):
        tenant, repository = data.draw(st.sampled_from(TENANTS)), data.draw(st.sampled_from(REPOS))
        admin = next(a for a in self.actors if a.tenant == tenant and a.admin)
        marker = self.marker(Canary(tenant, "agents_md", repository=repository))
        etag = self.agents_md.get((tenant, repository))
        url = f"/api/v1/repositories/{repository}/agents-md"
        response = self.send(admin, "put", url, {"text": f"# AGENTS.md\n\n## Always\n- {marker}\n"}, **(
            {"HTTP_IF_MATCH": etag} if etag else {}
        ))  # fmt: skip
        assert response.status_code == (200 if etag else 201)
        self.agents_md[(tenant, repository)] = response["ETag"]
        reader = data.draw(st.sampled_from(self.actors), label="reader")
        response = self.send(reader, "get", url)
        if reader.repositories and repository not in reader.repositories:
            assert response.status_code == 403
        else:
            assert response.status_code == (200 if (reader.tenant, repository) in self.agents_md else 404)

    # -- MCP rules (in process; the same tools the endpoint serves) ------------------------------

    @rule(data=st.data())
    def mcp_add_note(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        body, status, canary, marker = self.draw_memory(data, actor)
        body.pop("title")
        is_error, payload = self.mcp(actor, "add_note", body)
        assert is_error == (status != 201), payload
        if not is_error:
            listed = self.send(actor, "get", f"/api/v1/memories/{payload['id']}").json()
            self.record_write(actor, listed, canary, marker)

    @rule(data=st.data())
    def mcp_reads(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        markers = sorted(m for m, c in self.canaries.items() if c.what == "memory") or ["deploying"]
        where = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        self.mcp(actor, "search_memory", {"query": data.draw(st.sampled_from(markers), label="query")} | where)
        self.mcp(actor, "get_session_context", where)
        self.mcp(actor, "list_decisions", {"repository": data.draw(st.sampled_from(REPOS))})

    @rule(data=st.data())
    def mcp_supersede(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        old, new = self.any_memory_id(data), self.any_memory_id(data)
        is_error, payload = self.mcp(actor, "supersede_memory", {"memory_id": old, "by": new})
        ok = self.readable(actor, old) and self.readable(actor, new) and self.may_supersede(old, new)
        assert is_error == (not ok), payload


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_no_token_ever_sees_what_it_may_not_read(settings):
    settings.RATE_LIMIT_PER_MINUTE = 0
    run_state_machine_as_test(IsolationMachine)
