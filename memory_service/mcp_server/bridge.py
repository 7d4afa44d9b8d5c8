"""Run a service function for an MCP call: authenticate the bearer token, bind the transaction to
its tenant, call, and turn domain errors into tool errors the model can read. Neither those nor
argument errors ever repeat a submitted value."""

from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from memory_service.exceptions import ApplicationError
from tenants.access import Principal, require_permission
from tenants.authentication import authenticate_principal

T = TypeVar("T")


def _describe(exc: ApplicationError) -> str:
    fields = "; ".join(f"{name}: {' '.join(map(str, msgs))}" for name, msgs in exc.fields.items())
    return f"{exc.code}: {exc.message}" + (f" ({fields})" if fields else "")


# pydantic error types whose message states the rule that was broken (a type, a bound, the allowed
# values, a count), never the value given. Any other type is reported as "Invalid value.".
_RULE_MESSAGES = {
    "missing", "string_type", "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing",
    "bool_type", "bool_parsing", "list_type", "dict_type", "model_type", "greater_than", "greater_than_equal",
    "less_than", "less_than_equal", "multiple_of", "finite_number", "string_too_short", "string_too_long",
    "too_short", "too_long", "literal_error", "enum", "string_pattern_mismatch", "string_unicode",
}  # fmt: skip


def _argument_path(loc: tuple) -> str:
    """``tags.3`` for the fourth tag: the argument's name (extra arguments are ignored, so the first
    part is always one the tool declares) and list positions, nothing the caller chose."""
    head, *rest = loc or ("arguments",)
    return ".".join([str(head), *(str(part) for part in rest if isinstance(part, int))])


def describe_invalid_arguments(error: ValidationError) -> str:
    """A tool error message for arguments that fail a tool's schema: which argument is wrong and
    why, without the value (pydantic's own message quotes each rejected input)."""
    problems = {}
    for item in error.errors(include_url=False, include_input=False):
        why = item["msg"] if item["type"] in _RULE_MESSAGES else "Invalid value."
        problems.setdefault(_argument_path(item["loc"]), why)
    fields = "; ".join(f"{name}: {why}" for name, why in problems.items())
    return f"invalid: The arguments do not match the tool's schema. ({fields})"


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
