"""Run a service function for an MCP call: authenticate the bearer token, bind the transaction to
its tenant, call, and turn domain errors into tool errors the model can read."""

from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver.exceptions import ToolError

from memory_service.exceptions import ApplicationError
from tenants.access import Principal, require_permission
from tenants.authentication import authenticate_principal

T = TypeVar("T")


def _describe(exc: ApplicationError) -> str:
    fields = "; ".join(f"{name}: {' '.join(map(str, msgs))}" for name, msgs in exc.fields.items())
    return f"{exc.code}: {exc.message}" + (f" ({fields})" if fields else "")


def _run(raw_token: str, permission: str | None, fn: Callable[[Principal], T]) -> T:
    close_old_connections()
    try:
        with transaction.atomic():
            token = authenticate_principal(raw_token)
            if token is None:
                raise ToolError("not_authenticated: the token is no longer valid.")
            try:
                if permission:
                    require_permission(token, permission)
                return fn(token)
            except ApplicationError as exc:
                raise ToolError(_describe(exc)) from exc
    finally:
        close_old_connections()


async def call_with_token(permission: str | None, fn: Callable[[Principal], T]) -> T:
    """Call ``fn(principal)`` in a transaction bound to the caller's tenant (RLS applies)."""
    access = get_access_token()
    if access is None:
        raise ToolError("not_authenticated: a bearer token is required.")
    return await sync_to_async(_run, thread_sensitive=False)(access.token, permission, fn)
