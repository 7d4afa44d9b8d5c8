"""The one place where a transaction learns which tenant it serves.

Row-level security policies compare each row's ``tenant_id`` with the transaction-local setting
``app.tenant_id`` (see ``tenants.rls``). Everything that touches tenant data — REST requests,
MCP tools, Celery tasks, tenant administrators in the admin — runs inside ``tenant_context``.
Platform operators (superusers in the admin, operator commands) run inside ``platform_context``,
which routes queries to the ``admin`` alias whose role may bypass RLS.
"""

import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction

ADMIN_DB_ALIAS = "admin"

_platform: contextvars.ContextVar[bool] = contextvars.ContextVar("platform", default=False)


def platform_context_active() -> bool:
    """True while the current code runs as a platform operator (see ``platform_context``)."""
    return _platform.get()


# Sets a transaction-local setting (name, name, value) and reads back its previous value.
_ASSIGNMENT = "SELECT current_setting(%s, true), set_config(%s, %s, true)"


def _set_local(name: str, value: str, *, using: str) -> str:
    """Set a transaction-local setting and return its previous value ('' when unset)."""
    with connections[using].cursor() as cursor:
        cursor.execute(_ASSIGNMENT, [name, name, value])
        previous = cursor.fetchone()[0]
    return previous or ""


def query_with_settings(
    settings: dict[str, str], sql: str, params: list, *, using: str = DEFAULT_DB_ALIAS
) -> tuple[dict[str, str], list[tuple]]:
    """Set transaction-local ``settings``, then run ``sql``, in one round trip.

    Returns the settings' previous values ('' when unset) and the rows of the last statement of
    ``sql`` (which may hold several, separated by ';'). Each statement of the batch runs after the
    one before it with a snapshot of its own, so ``sql`` sees the settings and whatever a lock
    taken earlier in the batch waited for; a ``set_config()`` inside the same statement as the
    query would not be ordered against the row policies. Needs an open transaction, and Django's
    default psycopg cursor (client-side binding: parameters are quoted into the batch by psycopg).
    """
    if not connections[using].in_atomic_block:
        raise RuntimeError("query_with_settings() needs an open transaction")
    assignments = "".join(f"{_ASSIGNMENT}; " for _ in settings)
    values = [value for name, setting in settings.items() for value in (name, name, setting)]
    previous = {}
    with connections[using].cursor() as cursor:
        cursor.execute(assignments + sql, values + list(params))
        for name in settings:
            previous[name] = cursor.fetchone()[0] or ""
            cursor.nextset()
        while cursor.nextset():
            pass
        return previous, cursor.fetchall()


def tenant_binding_sql(tenant_id: uuid.UUID | str) -> tuple[str, list[str]]:
    """A statement (with its parameters) that binds the current transaction of any connection,
    Django's or a plain psycopg one, to ``tenant_id`` for RLS; put it first in a batch."""
    return _ASSIGNMENT + "; ", ["app.tenant_id", "app.tenant_id", str(tenant_id)]


def set_current_tenant(tenant_id: uuid.UUID | str, *, using: str = DEFAULT_DB_ALIAS) -> str:
    """Set the tenant of the current transaction for RLS; returns the previous value.

    Must run inside a transaction: a session-level setting would leak to the next user of a
    pooled connection.
    """
    if not connections[using].in_atomic_block:
        raise RuntimeError("set_current_tenant() needs an open transaction")
    return _set_local("app.tenant_id", str(tenant_id), using=using)


@contextmanager
def tenant_context(tenant_id: uuid.UUID | str) -> Iterator[None]:
    """Run the block in a transaction (or savepoint) bound to one tenant.

    Uses the connection the router picks (``admin`` inside ``platform_context``). The previous
    tenant is restored on exit: a transaction-local setting survives RELEASE SAVEPOINT, so a
    nested context would otherwise leak its tenant to the outer block.
    """
    using = ADMIN_DB_ALIAS if platform_context_active() else DEFAULT_DB_ALIAS
    with transaction.atomic(using=using):
        previous = set_current_tenant(tenant_id, using=using)
        yield
        # On an exception the savepoint's rollback restores the setting by itself.
        if previous != str(tenant_id):
            _set_local("app.tenant_id", previous, using=using)


@contextmanager
def platform_context() -> Iterator[None]:
    """Run the block as a platform operator: queries go to the RLS-bypassing ``admin`` alias."""
    token = _platform.set(True)
    try:
        with transaction.atomic(using=ADMIN_DB_ALIAS):
            yield
    finally:
        _platform.reset(token)
