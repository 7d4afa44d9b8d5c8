"""Tenant and user isolation under random sequences of operations (hypothesis, stateful).

Three fresh tenants per example, each with the tokens of ``TOKENS``: one with every permission,
tokens bound to a user, to repositories or to both, and bound tokens that may also export or
administer. Random REST calls and MCP tool calls write, read, search, edit, delete and supersede
memories, file proposals, import AGENTS.md, embed a tenant's pending memories (searches then run
their dense stage on side connections), start and read exports, mint, list and revoke tokens,
erase users and read the activity and the audit — naming ids of other tenants and other users as
often as their own. Every text written carries a unique marker (``canary-<run><tenant>-<owner>-<n>``)
whose owner the test records. After every response:

- no body contains a marker the calling token may not read: another tenant's, another user's
  user-scope or session memory (for a token bound to a user), a memory of a repository the token
  is not bound to, a proposal the token did not file (unless it is an admin token);
- the status is the one the model predicts (200 only for what the token may read, 404 for the
  rest — never 403, which would reveal existence; 403 for naming another user or repository; the
  operations beyond memories follow the table of expected answers below);
- what a write returned 2xx for is then readable by its writer; a full listing of memories is
  exactly the memories the token may read; a search returns only memories the token may read and
  finds a memory just embedded by its marker; a token listing is exactly the tokens the token may
  manage, and a minted token reads exactly what its bindings allow.
"""

import asyncio
import functools
import itertools
import json
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError

from memory_service.embeddings.backends import get_backend
from memory_service.mcp_server.server import build_server
from memory_service.memories.embedding import embed_memories, pending_memory_ids
from memory_service.retrieval import side
from tenants.context import tenant_context
from tests.conftest import ALL_PERMISSIONS, client_for
from tests.factories import make_tenant, make_token

TENANTS = ("t0", "t1", "t2")
USERS = ("u1", "u2", "u3")
REPOS = ("r1", "r2")
SESSIONS = ("s1", "s2")
AGENT = ["memory:read", "memory:write", "proposals:write"]
# What a token minted without a list of permissions may do.
DEFAULT_PERMISSIONS = frozenset({"memory:read", "memory:write"})
# key → (bound user, bound repositories, permissions)
TOKENS = {
    "admin": ("", [], ALL_PERMISSIONS),
    "u1": ("u1", [], AGENT),
    "u2": ("u2", [], [*AGENT, "export"]),
    "r1": ("", ["r1"], AGENT),
    "u1r2": ("u1", ["r2"], AGENT),
    "u1admin": ("u1", ["r1"], ALL_PERMISSIONS),
    "r12admin": ("", ["r1", "r2"], ALL_PERMISSIONS),
}
MARKER_RE = re.compile(r"canary-[a-z0-9]+-[a-z0-9]+-\d+")
_runs = itertools.count(1)
# Totals over every example of a test run: machines, steps, searches answered 200, dense stages run
# on a side connection, memories found again by their marker just after being embedded; and the
# steps of each rule.
RUN: Counter = Counter()
RULES: Counter = Counter()

# An id or none (''). Listed last: hypothesis draws the first element far more often than the others.
user_arg = st.sampled_from(USERS + ("",))
repo_arg = st.sampled_from(REPOS + ("",))
session_arg = st.sampled_from(SESSIONS + ("",))


@dataclass(frozen=True)
class Actor:
    """A token as the model knows it."""

    key: str
    tenant: str
    user: str
    repositories: tuple[str, ...]
    permissions: frozenset[str] = field(repr=False)
    raw: str = field(repr=False)
    prefix: str = field(default="", repr=False)

    def may(self, permission: str) -> bool:
        return permission in self.permissions

    @property
    def admin(self) -> bool:
        return self.may("admin")

    @property
    def bound(self) -> bool:
        return bool(self.user or self.repositories)


@dataclass(frozen=True)
class Canary:
    """Who may read the thing that carries a marker (and, for a memory, who wrote it)."""

    tenant: str
    what: str  # memory | proposal | agents_md
    scope: str = ""
    user: str = ""
    repository: str = ""
    session: str = ""
    author: str = ""


@dataclass
class Written:
    """A memory the model knows: its owner and its current marker."""

    canary: Canary
    marker: str
    deleted: bool = False
    embedded: bool = False


@dataclass
class ExportJob:
    """An export job the model knows. No worker runs: it stays queued until an erasure erases it."""

    tenant: str
    user: str  # '' for the whole tenant; after an erasure of its user, no user's any more
    erased: bool = False


# -- Expected answers beyond memories: the rules of tenants/access.py, written out here -----------
#
#   operation                     unbound            bound to user U              bound to repositories R
#   GET activity, GET audit,      200                403                          403
#     POST erasures
#   POST exports {"user": X}      202 (X's job,      202 (U's job) if X is ''     403
#                                 '' = the tenant)   or U, else 403
#   GET exports/{id}              200                404 unless U's job           403
#   GET exports/{id}/download     409 (410 erased)   404 unless U's job, else     403
#                                                    409 (410 erased)
#   POST tokens                   201                201 if the user is U         201 if the repositories are
#                                                                                 non-empty and ⊆ R, and no
#                                                                                 user unless bound to U too
#   GET tokens lists,             every token        tokens of user U             tokens of repositories
#     revoke finds (else 404)                                                     non-empty and ⊆ R
#
# A token bound to both a user and repositories meets both columns' conditions (on an export job,
# the user's 404 comes before the repositories' 403). A token lacking the operation's permission
# (admin, or export) gets 403 before anything is looked up; another tenant's job or token is a 404.
# A minted token never has a permission its issuer lacks (403). A token bound to repositories only
# may not mint a user's token: that token would read the user's memories, which its issuer cannot.


def expect_tenant_wide(actor: Actor) -> int:
    """GET activity, GET audit, POST erasures: they span every user and repository."""
    return 200 if actor.admin and not actor.bound else 403


def expect_export_start(actor: Actor, user: str) -> tuple[int, str | None]:
    """POST exports naming ``user`` ('' for none): the status and the user the job exports."""
    if not actor.may("export") or actor.repositories:
        return 403, None
    if actor.user:
        return (202, actor.user) if user in ("", actor.user) else (403, None)
    return 202, user


def expect_export_read(actor: Actor, job: ExportJob | None, *, download: bool) -> int:
    """GET exports/{id} (or its download) of ``job`` (None: no such job)."""
    if not actor.may("export"):
        return 403
    if job is None or job.tenant != actor.tenant or (actor.user and job.user != actor.user):
        return 404
    if actor.repositories:
        return 403
    if download:
        return 410 if job.erased else 409  # never built: no worker runs
    return 200


def expect_token_create(issuer: Actor, *, permissions: frozenset, user: str, repositories: set) -> int:
    """POST tokens by ``issuer``: 201 only for a token within the issuer."""
    within = (
        issuer.admin
        and permissions <= issuer.permissions
        and (user == issuer.user if issuer.user else not (issuer.repositories and user))
        and (not issuer.repositories or (repositories and repositories <= set(issuer.repositories)))
    )
    return 201 if within else 403


def may_manage_token(manager: Actor, token: Actor) -> bool:
    """Whether GET tokens by ``manager`` lists ``token``, and revoking it is not a 404: the tokens a
    bound manager could have minted (same user, or none for a repository-only manager)."""
    bound = bool(manager.user or manager.repositories)
    return (
        token.tenant == manager.tenant
        and (not bound or token.user == manager.user)
        and (
            not manager.repositories
            or (bool(token.repositories) and set(token.repositories) <= set(manager.repositories))
        )
    )


def step(function):
    """A rule of the machine that draws its arguments as it goes, counted in ``RUN`` and ``RULES``."""

    @functools.wraps(function)
    def counted(self, data):
        RUN["steps"] += 1
        RULES[function.__name__] += 1
        return function(self, data)

    return rule(data=st.data())(counted)


def side_served() -> int:
    """How many dense stages the side connections have run so far (``retrieval.side``)."""
    stats = side.side_pool().get_stats()
    return stats.get("requests_num", 0) - stats.get("requests_errors", 0)


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
        RUN["machines"] += 1
        self.n = itertools.count(1)
        self.tenants = {}
        self.actors: list[Actor] = []
        for tenant_key in TENANTS:
            tenant = self.tenants[tenant_key] = make_tenant(f"iso-{self.run}-{tenant_key}")
            for key, (user, repositories, permissions) in TOKENS.items():
                issued = make_token(tenant, name=key, permissions=permissions, user=user, repositories=repositories)
                self.actors.append(Actor(key, tenant_key, user, tuple(repositories), frozenset(permissions),
                                         issued.raw, issued.token.prefix))  # fmt: skip
        self.clients = {actor: client_for(actor.raw) for actor in self.actors}
        self.canaries: dict[str, Canary] = {}
        self.memories: dict[str, Written] = {}  # id → what the model knows
        self.notes: dict[tuple, str] = {}  # (tenant, user, session, name) → memory id
        self.proposals: dict[str, str] = {}  # id → marker
        self.filers: dict[str, set[str]] = {}  # proposal marker → keys of the tokens that filed it
        self.agents_md: dict[tuple[str, str], str] = {}  # (tenant, repository) → current ETag
        self.queried: dict[str, set[str]] = {t: set() for t in TENANTS}  # tenant → queries its tokens sent
        self.exports: dict[str, ExportJob] = {}  # id → job
        self.tokens: dict[str, Actor] = {actor.prefix: actor for actor in self.actors}  # prefix → token
        self.minted: set[str] = set()  # prefixes of the tokens minted through the API
        self.revoked: set[str] = set()

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
        # The permission table (README, "Tenants, tokens and administrators"), written out here, not
        # imported from the service.
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

    def check_body(self, actor: Actor, body: str, what: str, shown: set[str] = frozenset()) -> None:
        """The invariant: nothing in a response the token may not read (``shown``: markers it may
        see anyway, such as the queries its own tenant sent)."""
        for marker in MARKER_RE.findall(body):
            canary = self.canaries.get(marker)
            assert canary is not None, f"{what}: unknown marker {marker} shown to {actor}"
            assert marker in shown or self.may_read(actor, canary, self.filers.get(marker, set())), (
                f"{what}: {marker} ({canary}) shown to {actor}"
            )

    def check_items(self, actor: Actor, ids, what: str) -> None:
        """Every memory listed is one the token may read."""
        unreadable = [i for i in ids if not self.readable(actor, i)]
        assert not unreadable, f"{what}: {[(i, self.memories.get(i)) for i in unreadable]} shown to {actor}"

    @staticmethod
    def names_forbidden(actor: Actor, *, scope: str = "", user: str = "", repository: str = "", session: str = ""):
        """Whether a request naming these ids or this scope is a 403 for ``actor``."""
        repository_only = bool(actor.repositories) and not actor.user
        return bool(
            (actor.user and user and user != actor.user)
            or (actor.repositories and repository and repository not in actor.repositories)
            or (repository_only and (user or session or scope in ("user", "session")))
        )

    def search_status(self, actor: Actor, *, user: str = "", repository: str = "", session: str = "") -> int:
        """A search or a session context naming these ids: 403 for naming what the token may not,
        400 for naming no scope with no user of its own."""
        if self.names_forbidden(actor, user=user, repository=repository, session=session):
            return 403
        return 200 if user or actor.user or repository or session else 400

    @staticmethod
    def owner_ids(canary: Canary) -> dict:
        """The ids a search names to look in exactly the scope of ``canary``'s memory."""
        if canary.scope == "user":
            return {"user": canary.user}
        if canary.scope == "repository":
            return {"repository": canary.repository}
        return {"user": canary.user, "session": canary.session} | (
            {"repository": canary.repository} if canary.repository else {}
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
            return 201, Canary(actor.tenant, "memory", "user", user, author=user)
        if scope == "repository":
            return 201, Canary(actor.tenant, "memory", "repository", repository=repository, author=user)
        return 201, Canary(actor.tenant, "memory", "session", user, repository, session, author=user)

    def unbound_admin(self, tenant: str) -> Actor:
        return next(a for a in self.actors if a.tenant == tenant and a.key == "admin")

    # -- requests ---------------------------------------------------------------------------

    def send(self, actor: Actor, method: str, url: str, body=None, *, shown: set[str] = frozenset(), **kwargs):
        client = self.clients[actor]
        if method == "get":
            response = client.get(url, body or {}, **kwargs)
        else:
            response = getattr(client, method)(url, body, format="json", **kwargs)
        note(f"{actor.tenant}/{actor.key} {method.upper()} {url} {body or ''} → {response.status_code}")
        assert response.status_code < 500, response.content
        self.check_body(actor, response.content.decode(), f"{method.upper()} {url}", shown)
        return response

    def mcp(self, actor: Actor, tool: str, arguments: dict):
        is_error, payload = mcp_call(actor.raw, tool, arguments)
        note(f"{actor.tenant}/{actor.key} MCP {tool} {arguments} → {'error' if is_error else 'ok'}")
        self.check_body(actor, json.dumps(payload), f"MCP {tool}")
        return is_error, payload

    def search(self, actor: Actor, body: dict) -> set[str] | None:
        """POST search: the status the model predicts, only memories the token may read; returns
        the ids found (None unless 200)."""
        self.queried[actor.tenant].add(body["query"])
        served = side_served()
        response = self.send(actor, "post", "/api/v1/search", body)
        where = {name: body.get(name, "") for name in ("user", "repository", "session")}
        assert response.status_code == self.search_status(actor, **where)
        if response.status_code != 200:
            return None
        RUN["searches"] += 1
        RUN["side"] += side_served() - served
        found = {item["id"] for item in response.json()["items"]}
        self.check_items(actor, found, "search")
        return found

    def any_memory_id(self, data) -> str:
        # Ids in the order the model learnt them: ids are random, so sorting them would pick another
        # memory when hypothesis replays the example (the same for proposals, exports and tokens).
        ids = [*self.memories, str(uuid.uuid4())]
        return data.draw(st.sampled_from(ids), label="memory id")

    def record_write(self, actor: Actor, memory: dict, canary: Canary, marker: str) -> None:
        assert (memory["scope"], memory["user"], memory["repository"], memory["session"], memory["author"]) == (
            canary.scope, canary.user, canary.repository, canary.session, canary.author
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

    def listed_memories(self, actor: Actor) -> None:
        """A full listing of memories is exactly what the token may read."""
        response = self.send(actor, "get", "/api/v1/memories", {"limit": 200})
        assert response.status_code == (200 if actor.may("memory:read") else 403)
        if response.status_code == 200:
            listed = {m["id"] for m in response.json()["results"]}
            assert listed == {i for i in self.memories if self.readable(actor, i)}

    # -- REST rules ---------------------------------------------------------------------------

    @step
    def create_memory(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        body, status, canary, marker = self.draw_memory(data, actor)
        response = self.send(actor, "post", "/api/v1/memories", body)
        assert response.status_code == status
        if status == 201:
            self.record_write(actor, response.json(), canary, marker)

    @step
    def bulk_create(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        items = [self.draw_memory(data, actor) for _ in range(data.draw(st.integers(1, 3), label="items"))]
        response = self.send(actor, "post", "/api/v1/memories/bulk", {"items": [item[0] for item in items]})
        assert response.status_code == 200
        for (_body, status, canary, marker), result in zip(items, response.json()["results"], strict=True):
            assert result["status"] == status
            if status == 201:
                self.record_write(actor, result["memory"], canary, marker)

    @step
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
        if not filters:
            self.listed_memories(actor)
            return
        response = self.send(actor, "get", "/api/v1/memories", filters | {"limit": 200})
        assert response.status_code == (403 if self.names_forbidden(actor, **filters) else 200)

    @step
    def get_memory(self, data):
        actor, memory_id = data.draw(st.sampled_from(self.actors), label="actor"), self.any_memory_id(data)
        response = self.send(actor, "get", f"/api/v1/memories/{memory_id}")
        assert response.status_code == (200 if self.readable(actor, memory_id) else 404)
        if response.status_code == 200:
            assert self.memories[memory_id].marker in response.json()["text"]

    @step
    def patch_memory(self, data):
        actor, memory_id = data.draw(st.sampled_from(self.actors), label="actor"), self.any_memory_id(data)
        known = self.memories.get(memory_id)
        marker = self.marker(known.canary) if known else f"canary-e{self.run}{actor.tenant}-none-{next(self.n)}"
        self.canaries.setdefault(marker, Canary("nobody", "memory"))
        readable = self.readable(actor, memory_id)
        response = self.send(actor, "patch", f"/api/v1/memories/{memory_id}", {"text": f"Edited: {marker}"})
        assert response.status_code == (200 if readable else 404)
        if readable:
            known.marker, known.embedded = marker, False

    @step
    def delete_memory(self, data):
        actor, memory_id = data.draw(st.sampled_from(self.actors), label="actor"), self.any_memory_id(data)
        readable = self.readable(actor, memory_id)
        response = self.send(actor, "delete", f"/api/v1/memories/{memory_id}")
        assert response.status_code == (204 if readable else 404)
        if readable:
            self.memories[memory_id].deleted = True
        elif memory_id in self.memories and not self.memories[memory_id].deleted:
            owner = self.unbound_admin(self.memories[memory_id].canary.tenant)
            assert self.send(owner, "get", f"/api/v1/memories/{memory_id}").status_code == 200, (
                "a refused delete deleted"
            )

    @step
    def supersede(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        old, new = self.any_memory_id(data), self.any_memory_id(data)
        response = self.send(actor, "post", f"/api/v1/memories/{old}/supersede", {"by": new})
        if not (self.readable(actor, old) and self.readable(actor, new)):
            assert response.status_code == 404
        else:
            assert response.status_code == (200 if self.may_supersede(old, new) else 400)

    @step
    def search_memories(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        markers = [m for m, c in self.canaries.items() if c.what == "memory"] or ["deploying"]
        query = data.draw(st.sampled_from(markers + ["deploying", "Remember"]), label="query")
        where = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        self.search(actor, {"query": query, "top": data.draw(st.sampled_from((10, 50)), label="top")} | where)

    @step
    def embed(self, data):
        """Embed a tenant's pending memories with the real backend, as the worker would; then find
        one of them again by its marker, as a token that may read it, in exactly its scope."""
        waiting = [i for i, known in self.memories.items() if not known.deleted and not known.embedded]
        tenants = [t for t in TENANTS if any(self.memories[i].canary.tenant == t for i in waiting)] or TENANTS
        tenant_key = data.draw(st.sampled_from(tenants), label="tenant")
        tenant = self.tenants[tenant_key]
        pending = {i for i in waiting if self.memories[i].canary.tenant == tenant_key}
        with tenant_context(tenant.id):
            ids = pending_memory_ids(tenant_id=str(tenant.id), limit=10_000)
            assert set(ids) == pending, "pending: every memory written or edited since it was last embedded"
            assert embed_memories(tenant_id=str(tenant.id), memory_ids=ids, backend=get_backend()) == len(ids)
        note(f"embedded {len(ids)} memories of {tenant_key}")
        for memory_id in ids:
            self.memories[memory_id].embedded = True
        if not ids:
            return
        memory_id = data.draw(st.sampled_from([i for i in self.memories if i in pending]), label="embedded memory")
        known = self.memories[memory_id]
        owner = self.owner_ids(known.canary)
        readers = [
            a for a in self.actors
            if a.tenant == tenant_key and self.may_read(a, known.canary) and not self.names_forbidden(a, **owner)
        ]  # fmt: skip
        reader = data.draw(st.sampled_from(readers), label="reader")
        found = self.search(reader, {"query": known.marker, "top": 50} | owner)
        assert found is not None and memory_id in found, f"{known} not found by its marker"
        RUN["found"] += 1

    @step
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
            self.memories[existing].marker, self.memories[existing].embedded = marker, False

    @step
    def decisions_and_context(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        repository = data.draw(st.sampled_from(REPOS))
        response = self.send(actor, "get", "/api/v1/decisions", {"repository": repository, "limit": 200})
        assert response.status_code == (403 if self.names_forbidden(actor, repository=repository) else 200)
        if response.status_code == 200:
            self.check_items(actor, [m["id"] for m in response.json()["results"]], "decisions")
        where = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        response = self.send(actor, "get", "/api/v1/context", {k: v for k, v in where.items() if v})
        assert response.status_code == self.search_status(actor, **where)  # the same rule: 400 if nothing is named

    @step
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

    @step
    def read_proposals(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        response = self.send(actor, "get", "/api/v1/proposals", {"limit": 200})
        assert response.status_code == 200
        listed = {p["id"] for p in response.json()["results"]}
        assert listed == {i for i in self.proposals if self.may_read_proposal(actor, i)}
        proposal_id = data.draw(st.sampled_from([*self.proposals, str(uuid.uuid4())]), label="proposal")
        response = self.send(actor, "get", f"/api/v1/proposals/{proposal_id}")
        assert response.status_code == (200 if self.may_read_proposal(actor, proposal_id) else 404)

    @step
    def agents_md(self, data):
        tenant, repository = data.draw(st.sampled_from(TENANTS)), data.draw(st.sampled_from(REPOS))
        admin = self.unbound_admin(tenant)
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

    # -- tenant-wide operations, exports and tokens (the table of expected answers) --------------

    @step
    def activity_and_audit(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        # The activity shows the queries the tenant's own tokens sent, whatever markers they named.
        response = self.send(actor, "get", "/api/v1/activity", {"limit": 200}, shown=self.queried[actor.tenant])
        assert response.status_code == expect_tenant_wide(actor)
        response = self.send(actor, "get", "/api/v1/audit", {"limit": 200})
        assert response.status_code == expect_tenant_wide(actor)
        if response.status_code == 200:
            named = {i for event in response.json()["results"] if event["resource_type"] == "memory"
                     for i in event["resource_ids"]}  # fmt: skip
            strangers = [i for i in named if i not in self.memories or self.memories[i].canary.tenant != actor.tenant]
            assert not strangers, f"audit: memories of another tenant {strangers}"

    @step
    def erase_user(self, data):
        actor, user = data.draw(st.sampled_from(self.actors), label="actor"), data.draw(st.sampled_from(USERS))
        response = self.send(actor, "post", "/api/v1/erasures", {"user": user})
        assert response.status_code == expect_tenant_wide(actor)
        if response.status_code != 200:
            return
        # Every memory the user owns or wrote, and every export that may hold them.
        erased = [
            known for known in self.memories.values()
            if known.canary.tenant == actor.tenant and not known.deleted
            and user in (known.canary.user, known.canary.author)
        ]  # fmt: skip
        counts = response.json()
        assert (counts["memories"], counts["embeddings"]) == (len(erased), sum(k.embedded for k in erased))
        for known in erased:
            known.deleted = True
        for job in self.exports.values():
            if job.tenant == actor.tenant and job.user == user:
                job.user, job.erased = f"erased {user}", True

    @step
    def start_export(self, data):
        actor, user = data.draw(st.sampled_from(self.actors), label="actor"), data.draw(user_arg)
        status, exported = expect_export_start(actor, user)
        response = self.send(actor, "post", "/api/v1/exports", {"user": user} if user else {})
        assert response.status_code == status
        if status == 202:
            assert response.json()["status"] == "queued"
            self.exports[response.json()["id"]] = ExportJob(actor.tenant, exported)

    @step
    def read_export(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        job_id = data.draw(st.sampled_from([*self.exports, str(uuid.uuid4())]), label="export")
        job = self.exports.get(job_id)
        response = self.send(actor, "get", f"/api/v1/exports/{job_id}")
        assert response.status_code == expect_export_read(actor, job, download=False)
        if response.status_code == 200:
            shown = response.json()
            assert shown["status"] == ("erased" if job.erased else "queued")
            assert job.erased or shown["user"] == job.user
        response = self.send(actor, "get", f"/api/v1/exports/{job_id}/download")
        assert response.status_code == expect_export_read(actor, job, download=True)

    @step
    def mint_token(self, data):
        issuer = data.draw(st.sampled_from(self.actors), label="issuer")
        permissions = data.draw(
            st.none() | st.lists(st.sampled_from(ALL_PERMISSIONS), min_size=1, unique=True), label="permissions"
        )
        user = data.draw(user_arg, label="user")
        repositories = data.draw(st.lists(st.sampled_from(REPOS), unique=True), label="repositories")
        granted = frozenset(permissions or DEFAULT_PERMISSIONS)
        status = expect_token_create(issuer, permissions=granted, user=user, repositories=set(repositories))
        name = f"minted-{next(self.n)}"
        body = {"name": name, "user": user, "repositories": repositories} | (
            {"permissions": permissions} if permissions else {}
        )
        response = self.send(issuer, "post", "/api/v1/tokens", body)
        assert response.status_code == status
        if status != 201:
            return
        created = response.json()
        minted = Actor(name, issuer.tenant, user, tuple(sorted(repositories)), granted, created["token"],
                       created["prefix"])  # fmt: skip
        assert (created["user"], tuple(created["repositories"]), frozenset(created["permissions"])) == (
            minted.user,
            minted.repositories,
            minted.permissions,
        )
        self.tokens[minted.prefix] = minted
        self.minted.add(minted.prefix)
        self.clients[minted] = client_for(minted.raw)
        self.listed_memories(minted)  # the new token reads what its bindings allow, no more

    @step
    def list_tokens(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        response = self.send(actor, "get", "/api/v1/tokens")
        assert response.status_code == (200 if actor.admin else 403)
        if response.status_code == 200:
            listed = {t["prefix"]: t["revoked"] for t in response.json()["results"]}
            expected = {p: p in self.revoked for p, token in self.tokens.items() if may_manage_token(actor, token)}
            assert listed == expected

    @step
    def revoke_token(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        # Minted tokens, and tokens the actor may not manage: revoking a token the machine acts
        # with would make every later step of that token a 401.
        prefixes = [p for p, token in self.tokens.items() if p in self.minted or not may_manage_token(actor, token)]
        prefix = data.draw(st.sampled_from([*prefixes, "nosuchtoken"]), label="prefix")
        token = self.tokens.get(prefix)
        managed = token is not None and may_manage_token(actor, token)
        response = self.send(actor, "post", f"/api/v1/tokens/{prefix}/revoke")
        assert response.status_code == (403 if not actor.admin else 200 if managed else 404)
        if response.status_code == 200:
            assert response.json()["revoked"] is True
            self.revoked.add(prefix)
            assert self.send(token, "get", "/api/v1/memories").status_code == 401

    # -- MCP rules (in process; the same tools the endpoint serves) ------------------------------

    @step
    def mcp_add_note(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        body, status, canary, marker = self.draw_memory(data, actor)
        body.pop("title")
        is_error, payload = self.mcp(actor, "add_note", body)
        assert is_error == (status != 201), payload
        if not is_error:
            listed = self.send(actor, "get", f"/api/v1/memories/{payload['id']}").json()
            self.record_write(actor, listed, canary, marker)

    @step
    def mcp_reads(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        markers = [m for m, c in self.canaries.items() if c.what == "memory"] or ["deploying"]
        where = {"user": data.draw(user_arg), "repository": data.draw(repo_arg), "session": data.draw(session_arg)}
        query = data.draw(st.sampled_from(markers), label="query")
        self.queried[actor.tenant].add(query)
        is_error, payload = self.mcp(actor, "search_memory", {"query": query} | where)
        assert is_error == (self.search_status(actor, **where) != 200), payload
        if not is_error:
            self.check_items(actor, [item["id"] for item in payload["items"]], "MCP search_memory")
        is_error, payload = self.mcp(actor, "get_session_context", where)
        assert is_error == (self.search_status(actor, **where) != 200), payload
        repository = data.draw(st.sampled_from(REPOS))
        is_error, payload = self.mcp(actor, "list_decisions", {"repository": repository})
        assert is_error == self.names_forbidden(actor, repository=repository), payload

    @step
    def mcp_supersede(self, data):
        actor = data.draw(st.sampled_from(self.actors), label="actor")
        old, new = self.any_memory_id(data), self.any_memory_id(data)
        is_error, payload = self.mcp(actor, "supersede_memory", {"memory_id": old, "by": new})
        ok = self.readable(actor, old) and self.readable(actor, new) and self.may_supersede(old, new)
        assert is_error == (not ok), payload


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_no_token_ever_sees_what_it_may_not_read(settings):
    settings.RATE_LIMIT_PER_MINUTE = 0
    # Searches run their dense stage on side connections, which see the committed data of this
    # transactional test.
    settings.SEARCH_SIDE_CONNECTIONS = 2
    side.close_side_pool()
    side.side_pool().wait(timeout=10)
    RUN.clear()
    RULES.clear()
    started = time.monotonic()
    try:
        run_state_machine_as_test(IsolationMachine)
    finally:
        side.close_side_pool()
    print(
        f"isolation fuzz: {RUN['steps']} steps over {RUN['machines']} machines in {time.monotonic() - started:.0f} s; "
        f"{RUN['searches']} searches answered, {RUN['side']} of them with the dense stage on a side connection; "
        f"{RUN['found']} memories found by their marker just after being embedded"
    )
    print("steps per rule:", ", ".join(f"{name} {count}" for name, count in sorted(RULES.items())))
    # Every search runs its dense stage; the side connections are free and open for the first one.
    assert RUN["side"] > 0 or not RUN["searches"], "no search ran its dense stage on a side connection"
