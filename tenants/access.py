"""Who may do what inside a tenant: the one access policy of every interface.

A ``Principal`` is built once per request or job — from a bearer token (REST and MCP), for a
person in the admin, for an operator's command, or for a job acting as one user — and handed to
every service and selector, which ask the functions below. REST views, MCP tools, admin actions,
commands and tasks only build it and pass it on; none of them holds a rule of its own.

Permissions say what a principal may do (README, "Tenants, tokens and administrators"); bindings say where, and are a
whitelist on every read and write:

- bound to a user U (and maybe to repositories R): U's user and session scopes, and repository
  scope — only R when it has repositories;
- bound to repositories R and no user: repository scope of R only; it may not name a user, nor
  read user or session scope;
- unbound: the whole tenant.

Admin operations that span users (activity, audit, erasure) need an unbound principal; exports
follow the bindings (a user-bound principal exports its own user; a repository-bound one none).
A token minted through the API never exceeds its issuer, in permissions or in bindings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from memory_service.exceptions import PermissionDeniedError, ValidationError
from tenants.identifiers import validate_identifier
from tenants.models import ApiToken, Permission, Tenant

# Scope values (memories.models.Scope), spelled here so that tenants imports nothing from memories.
USER_SCOPE = "user"
REPOSITORY_SCOPE = "repository"
SESSION_SCOPE = "session"


@dataclass(frozen=True)
class Principal:
    """Who is acting: a tenant, what it may do (permissions) and where (bindings).

    ``name`` is the client's name (``source_client``, activity rows), ``prefix`` the token's lookup
    prefix ('' when no token is behind it), ``actor`` how the audit names it.
    """

    tenant: Tenant
    permissions: frozenset[str]
    user: str = ""
    repositories: tuple[str, ...] = ()
    name: str = ""
    prefix: str = ""
    actor: str = ""
    token: ApiToken | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_token(cls, token: ApiToken) -> Principal:
        """The principal of a usable token (its tenant already loaded)."""
        return cls(
            tenant=token.tenant,
            permissions=frozenset(token.permissions),
            user=token.user,
            repositories=tuple(token.repositories),
            name=token.name,
            prefix=token.prefix,
            actor=f"token:{token.prefix}:{token.name}",
            token=token,
        )

    @classmethod
    def for_user(cls, *, tenant: Tenant, user: str) -> Principal:
        """What ``user`` may read, as a token bound to that user alone would (digest renders)."""
        return cls(tenant=tenant, permissions=frozenset({Permission.MEMORY_READ.value}), user=user, name="system")

    @classmethod
    def operator(cls, *, tenant: Tenant, actor: str) -> Principal:
        """An unbound principal with every permission: a person in the admin, a command, a job."""
        return cls(tenant=tenant, permissions=frozenset(Permission.values), name=actor, actor=actor)

    @property
    def tenant_id(self):
        return self.tenant.id

    @property
    def is_bound(self) -> bool:
        return bool(self.user or self.repositories)

    def has_permission(self, permission: str) -> bool:
        return permission in self.permissions


def require_permission(principal: Principal, permission: str) -> None:
    """403 naming the permission the principal lacks."""
    if not principal.has_permission(permission):
        raise PermissionDeniedError(f"The token lacks the '{permission}' permission.")


def require_unbound(principal: Principal, what: str) -> None:
    """403 for a bound principal: ``what`` spans every user and repository of the tenant."""
    if principal.is_bound:
        raise PermissionDeniedError(f"{what} covers the whole tenant: it needs a token bound to no user or repository.")


# --- memories -------------------------------------------------------------------------------


def memory_visibility(principal: Principal) -> Q:
    """The memories ``principal`` may read or write, as a filter on the memory table."""
    if principal.user:
        own = Q(scope=USER_SCOPE, user=principal.user) | Q(scope=SESSION_SCOPE, user=principal.user)
        repository = Q(scope=REPOSITORY_SCOPE)
        if principal.repositories:
            repository &= Q(repository__in=principal.repositories)
        return own | repository
    if principal.repositories:
        return Q(scope=REPOSITORY_SCOPE, repository__in=principal.repositories)
    return Q()


def check_user(principal: Principal, user: str | None) -> None:
    """A principal may name only a user it may act for (403 naming ``user``)."""
    if not user:
        return
    if principal.user and user != principal.user:
        raise PermissionDeniedError(
            "This token acts only as its own user.", fields={"user": ["Not this token's user."]}
        )
    if not principal.user and principal.repositories:
        raise PermissionDeniedError(
            "A token bound to repositories only cannot name a user.", fields={"user": ["Not allowed for this token."]}
        )


def check_repository(principal: Principal, repository: str | None) -> None:
    """A principal bound to repositories may name only those (403 naming ``repository``)."""
    if principal.repositories and repository and repository not in principal.repositories:
        raise PermissionDeniedError(
            "This token is bound to other repositories.", fields={"repository": ["Not allowed for this token."]}
        )


def check_session(principal: Principal, session: str | None) -> None:
    """Sessions belong to users: a principal bound to repositories only may not name one."""
    if session and principal.repositories and not principal.user:
        raise PermissionDeniedError(
            "A token bound to repositories only cannot read or write sessions.",
            fields={"session": ["Not allowed for this token."]},
        )


def check_scope(principal: Principal, scope: str | None) -> None:
    """A principal bound to repositories only may not ask for user or session scope."""
    if scope in (USER_SCOPE, SESSION_SCOPE) and principal.repositories and not principal.user:
        raise PermissionDeniedError(
            f"A token bound to repositories only cannot use {scope} scope.",
            fields={"scope": ["Not allowed for this token."]},
        )


@dataclass(frozen=True)
class Where:
    """The user, repository and session a request is about, after the principal's bindings."""

    user: str
    repository: str
    session: str


def resolve_where(principal: Principal, *, user: str = "", repository: str = "", session: str = "") -> Where:
    """Check the ids a request names against the principal, once for every interface.

    A bound principal may not name another user, repository or (repository-only) any session or
    user (403); an unnamed user is the principal's user; every id must be an opaque identifier
    (400 naming the field).
    """
    for name, value in (("user", user), ("repository", repository), ("session", session)):
        if value:
            validate_identifier(value, field=name)
    check_user(principal, user)
    check_repository(principal, repository)
    check_session(principal, session)
    return Where(user=user or principal.user, repository=repository, session=session)


# A memory may be replaced only by one that everyone who reads it can read as well (or more):
# scope → the scopes that may replace it, and whether the owner must be the same.
_VISIBILITY_RANK = {SESSION_SCOPE: 0, USER_SCOPE: 1, REPOSITORY_SCOPE: 2}


def check_supersede(*, old, new, field: str) -> None:
    """400 naming ``field`` unless ``new`` is at least as visible as ``old``.

    A repository memory is replaced only by a memory of the same repository; a user's memory by
    the same user's user-scope memory or by a repository memory; a session memory by the same
    user's memories or a repository memory. So a private memory never retires a shared decision.
    """
    if old.scope == REPOSITORY_SCOPE:
        allowed = new.scope == REPOSITORY_SCOPE and new.repository == old.repository
    elif new.scope == REPOSITORY_SCOPE:
        allowed = True
    else:
        allowed = new.user == old.user and _VISIBILITY_RANK[new.scope] >= _VISIBILITY_RANK[old.scope]
    if not allowed:
        raise ValidationError(
            "A memory can be superseded only by one at least as visible: "
            "a repository memory by a memory of the same repository, a user's memory by the same user's.",
            fields={field: ["Less visible than the memory it would supersede."]},
        )


# --- tokens ---------------------------------------------------------------------------------


def check_token_within(
    issuer: Principal, *, permissions: Iterable[str], user: str, repositories: Iterable[str]
) -> None:
    """A token ``issuer`` mints (or manages) never exceeds it: its permissions are a subset of the
    issuer's, and a bound issuer's token is bound within the issuer's bindings (403 naming the field).
    """
    extra = sorted(set(permissions) - issuer.permissions)
    if extra:
        raise PermissionDeniedError(
            "A token cannot grant permissions its issuer lacks.",
            fields={"permissions": [f"Not held by this token: {', '.join(extra)}."]},
        )
    if issuer.user and user != issuer.user:
        raise PermissionDeniedError(
            "A token bound to a user can only issue tokens bound to the same user.",
            fields={"user": ["Must be this token's user."]},
        )
    if not issuer.user and issuer.repositories and user:
        raise PermissionDeniedError(
            "A token bound to repositories only cannot issue a token bound to a user.",
            fields={"user": ["Not allowed for this token."]},
        )
    repositories = set(repositories)
    if issuer.repositories and (not repositories or not repositories <= set(issuer.repositories)):
        raise PermissionDeniedError(
            "A token bound to repositories can only issue tokens bound to some of them.",
            fields={"repositories": ["Must be a non-empty subset of this token's repositories."]},
        )


def token_visibility(principal: Principal) -> Q:
    """The tokens ``principal`` may list and revoke: those it could have issued itself
    (``check_token_within``): bound to its user (to no user, for a repository-only principal) and
    to a non-empty subset of its repositories, if it has any."""
    if not principal.is_bound:
        return Q()
    visible = Q(user=principal.user)
    if principal.repositories:
        visible &= Q(repositories__contained_by=list(principal.repositories)) & ~Q(repositories=[])
    return visible


# --- exports --------------------------------------------------------------------------------


def export_user_for(principal: Principal, user: str = "") -> str:
    """The user an export by ``principal`` is about ('' = the whole tenant).

    A user-bound principal exports its own user only (naming another is a 403); a principal bound
    to repositories cannot export at all, since a user's memories span repositories.
    """
    if principal.repositories:
        raise PermissionDeniedError("A token bound to repositories cannot export.")
    return resolve_where(principal, user=user).user


def export_job_visibility(principal: Principal) -> Q:
    """The export jobs ``principal`` may watch and download: its own user's when bound to one."""
    if principal.user:
        return Q(user=principal.user)
    return Q()


def check_export_job(principal: Principal, job) -> None:
    """A principal bound to repositories may not watch or download any export (403)."""
    if principal.repositories:
        what = "a tenant-wide export" if not job.user else "a user's export"
        raise PermissionDeniedError(f"A token bound to repositories cannot read {what}.")
