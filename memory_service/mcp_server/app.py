"""One ASGI application: MCP at /mcp/ and /t/<tenant>/mcp/, Django for everything else."""

import json
import re

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.transport_security import TransportSecuritySettings

from memory_service.mcp_server.auth import verify_raw_token
from memory_service.mcp_server.server import build_server
from memory_service.ratelimit import rate_limit_retry_after, token_prefix_from_header

TENANT_MCP_PATH = re.compile(r"^/t/(?P<slug>[A-Za-z0-9-]{1,63})/mcp/?$")


def _allowed_hosts() -> list[str]:
    hosts = []
    for host in settings.ALLOWED_HOSTS:
        hosts += [host, f"{host}:*"]
    return hosts


async def _json_error(send, status: int, code: str, message: str, headers: dict | None = None) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "fields": {}}}).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def _authorization(scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            return value.decode("latin-1")
    return ""


class MemoryServiceApp:
    """Routes MCP requests to the SDK's streamable-HTTP app and the rest to Django.

    Lifespan goes to the MCP app (its session manager needs it; Django rejects lifespan). On the
    per-tenant path the token's tenant must be the one named, else 404.
    """

    def __init__(self, django_app):
        self.django_app = django_app
        self.mcp = build_server()
        self.mcp_app = self.mcp.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=_allowed_hosts(),
                allowed_origins=settings.MCP_ALLOWED_ORIGINS,
            ),
        )

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.mcp_app(scope, receive, send)
        if scope["type"] != "http":
            return await self.django_app(scope, receive, send)
        path = scope["path"]
        tenant_match = TENANT_MCP_PATH.match(path)
        if path not in ("/mcp", "/mcp/") and tenant_match is None:
            return await self.django_app(scope, receive, send)

        authorization = _authorization(scope)
        prefix = token_prefix_from_header(authorization)
        retry_after = rate_limit_retry_after(prefix) if prefix else None
        if retry_after is not None:
            return await _json_error(send, 429, "rate_limited", "Too many requests.", {"Retry-After": str(retry_after)})
        if tenant_match is not None and prefix is not None:
            found = await sync_to_async(verify_raw_token, thread_sensitive=False)(
                authorization.split(" ", 1)[1].strip()
            )
            if found is not None and found[0] != tenant_match["slug"]:
                return await _json_error(send, 404, "not_found", "Not found.")
        return await self.mcp_app(scope | {"path": "/mcp", "raw_path": b"/mcp"}, receive, send)
