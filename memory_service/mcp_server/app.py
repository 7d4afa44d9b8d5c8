"""One ASGI application: MCP at /mcp/ and /t/<tenant>/mcp/, Django for everything else."""

import json
import re

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.transport_security import TransportSecuritySettings

from memory_service.exceptions import PayloadTooLargeError, ValidationError
from memory_service.inputs import check_json_body
from memory_service.mcp_server.auth import remember_verified, verify_raw_token
from memory_service.mcp_server.server import build_server
from memory_service.ratelimit import auth_failure_retry_after, token_request_retry_after

TENANT_MCP_PATH = re.compile(r"^/t/(?P<slug>[A-Za-z0-9-]{1,63})/mcp/?$")


def _allowed_hosts() -> list[str]:
    hosts = []
    for host in settings.ALLOWED_HOSTS:
        hosts += [host, f"{host}:*"]
    return hosts


async def _json_error(
    send, status: int, code: str, message: str, headers: dict | None = None, fields: dict | None = None
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "fields": fields or {}}}).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def _bearer_token(scope) -> str | None:
    """The bearer token of the request, taken as the SDK takes it; None without one."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            authorization = value.decode("latin-1")
            return authorization[7:] if authorization.lower().startswith("bearer ") else None
    return None


def _client_address(scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


async def _read_body(scope, receive) -> bytes | None:
    """The whole request body, or None once it exceeds MAX_REQUEST_BYTES."""
    limit = settings.MAX_REQUEST_BYTES
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            return None
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away; the SDK sees an empty body
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive):
    """A ``receive`` that hands out ``body`` once, then whatever the client sends next (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay():
        return pending.pop() if pending else await receive()

    return replay


class MemoryServiceApp:
    """Routes MCP requests to the SDK's streamable-HTTP app and the rest to Django.

    Lifespan goes to the MCP app (its session manager needs it; Django rejects lifespan). The bearer
    token is verified here first, for the rate limits REST applies too (memory_service.ratelimit):
    a verified token's requests count against it, a failed one against the client's address. On
    the per-tenant path the token's tenant must be the one named, else 404. A request body is read here
    first, as REST's are: over MAX_REQUEST_BYTES it is a 413, and JSON nested too deep or holding a
    lone surrogate is a 400 naming the argument, never its value (memory_service.inputs).
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

        raw = _bearer_token(scope)
        if raw is not None:
            found = await sync_to_async(verify_raw_token, thread_sensitive=False)(raw)
            remember_verified(raw, found)  # the SDK's verifier reuses the result
            if found is None:  # the SDK answers 401, or we 429 once the address fails too often
                retry_after = auth_failure_retry_after(_client_address(scope))
                if retry_after is not None:
                    message = "Too many failed authentications from this address."
                    return await _json_error(send, 429, "rate_limited", message, {"Retry-After": str(retry_after)})
            else:
                retry_after = token_request_retry_after(raw.partition(".")[0])
                if retry_after is not None:
                    message = "Too many requests."
                    return await _json_error(send, 429, "rate_limited", message, {"Retry-After": str(retry_after)})
                if tenant_match is not None and found[0] != tenant_match["slug"]:
                    return await _json_error(send, 404, "not_found", "Not found.")
        if scope["method"] == "POST":
            body = await _read_body(scope, receive)
            if body is None:
                message = f"The request body exceeds {settings.MAX_REQUEST_BYTES} bytes."
                return await _json_error(send, 413, PayloadTooLargeError.code, message)
            try:
                check_json_body(body, fields_at=("params", "arguments"))  # errors name the tool argument
            except ValidationError as exc:
                return await _json_error(send, 400, exc.code, exc.message, fields=exc.fields)
            receive = _replaying(body, receive)
        return await self.mcp_app(scope | {"path": "/mcp", "raw_path": b"/mcp"}, receive, send)
