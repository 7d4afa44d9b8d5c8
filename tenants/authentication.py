"""The one path from a bearer token to a tenant, shared by REST (DRF) and MCP."""

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from tenants.access import Principal
from tenants.models import ApiToken
from tenants.selectors import tenant_bind, token_for_prefix
from tenants.services import token_touch

MAX_TOKEN_LENGTH = 200


def authenticate_token(raw: str) -> ApiToken | None:
    """Return the usable token for ``raw`` and bind the current transaction to its tenant.

    Returns None for an unknown, malformed, revoked or expired token, or an inactive tenant —
    callers answer 401 without saying which. Must run inside a transaction: on success the
    transaction's RLS tenant is the token's tenant, so everything after it sees only that tenant.
    """
    prefix, dot, secret = raw.partition(".")
    if not dot or not prefix.isalnum() or not secret or len(raw) > MAX_TOKEN_LENGTH or not raw.isascii():
        return None
    token = token_for_prefix(prefix=prefix)
    if token is None or token.has_expired or not token.is_valid(raw):
        return None
    tenant = tenant_bind(tenant_id=token.tenant_id)
    if tenant is None or not tenant.is_active:
        return None
    token.tenant = tenant
    token_touch(token=token)
    return token


def authenticate_principal(raw: str) -> Principal | None:
    """The principal of the usable token ``raw`` (``authenticate_token``), or None."""
    token = authenticate_token(raw)
    return Principal.from_token(token) if token is not None else None


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <token>`` → ``request.auth`` is the token's ``Principal``, tenant set for RLS.

    Relies on ATOMIC_REQUESTS: the request's transaction carries the tenant setting.
    """

    keyword = b"bearer"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed()
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed() from exc
        principal = authenticate_principal(raw)
        if principal is None:
            raise exceptions.AuthenticationFailed()
        return (TokenUser(principal), principal)

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class TokenUser:
    """What DRF sees as ``request.user`` for a token: the client, not a Django user."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, principal: Principal):
        self.token = principal

    def __str__(self) -> str:
        return f"token:{self.token.prefix}"
