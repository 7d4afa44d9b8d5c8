"""Bearer tokens for MCP: the same lookup as REST (``tenants.authentication.authenticate_token``)."""

from contextvars import ContextVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from mcp.server.auth.provider import AccessToken

from tenants.authentication import authenticate_token


def verify_raw_token(raw: str) -> tuple[str, str, list[str]] | None:
    """(tenant slug, client name, permissions) for a usable token, else None."""
    close_old_connections()
    try:
        with transaction.atomic():
            token = authenticate_token(raw)
            if token is None:
                return None
            return token.tenant.slug, token.name, list(token.permissions)
    finally:
        close_old_connections()


# A token MemoryServiceApp verified for the request being served, with the result, so that the
# SDK's verifier, later in the same request, does not look it up again.
_verified: ContextVar[tuple[str, tuple[str, str, list[str]] | None] | None] = ContextVar("verified", default=None)


def remember_verified(raw: str, found: tuple[str, str, list[str]] | None) -> None:
    """Record ``verify_raw_token(raw)`` for the rest of the current request."""
    _verified.set((raw, found))


class ApiTokenVerifier:
    """The SDK's TokenVerifier: a valid token becomes an AccessToken; anything else a 401."""

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = _verified.get()
        if verified is not None and verified[0] == token:
            found = verified[1]
        else:
            found = await sync_to_async(verify_raw_token, thread_sensitive=False)(token)
        if found is None:
            return None
        slug, client, permissions = found
        return AccessToken(token=token, client_id=client, scopes=permissions, claims={"tenant": slug})
