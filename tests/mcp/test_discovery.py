"""MCP authorization discovery as the SDK's client performs it: a 401 advertises no
protected-resource metadata (the service issues its own bearer tokens and has no authorization
server to name), no well-known address pretends otherwise, and a client with a token connects."""

import asyncio

import httpx2
import pytest
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    handle_protected_resource_response,
)

from tests.factories import make_tenant, make_token
from tests.mcp.helpers import mcp_client

pytestmark = [pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def discover(server_url: str) -> tuple[httpx2.Response, list[tuple[str, int, object]]]:
    """The SDK client's discovery steps: the unauthenticated request, then every metadata address
    it would try, each with its status and the metadata the SDK makes of it (None: none found)."""

    async def run():
        async with httpx2.AsyncClient(timeout=30) as http:
            unauthorized = await http.post(server_url, json=LIST_TOOLS, headers=ACCEPT)
            advertised = extract_resource_metadata_from_www_auth(unauthorized)
            tried = []
            for url in build_protected_resource_metadata_discovery_urls(advertised, server_url):
                response = await http.get(url)
                tried.append((url, response.status_code, await handle_protected_resource_response(response)))
            return unauthorized, tried

    return asyncio.run(run())


@pytest.mark.parametrize("path", ["/mcp/", "/t/acme/mcp/"])
def test_it_answers_401_naming_no_metadata_and_serves_none(live_server_url, path):
    unauthorized, tried = discover(f"{live_server_url}{path}")
    assert unauthorized.status_code == 401
    challenge = unauthorized.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert extract_resource_metadata_from_www_auth(unauthorized) is None
    assert "127.0.0.1:8000" not in challenge
    # The well-known addresses a client falls back to answer 404: nothing advertises an
    # authorization server that does not exist.
    assert [url.removeprefix(live_server_url) for url, _status, _metadata in tried] == [
        f"/.well-known/oauth-protected-resource{path}",
        "/.well-known/oauth-protected-resource",
    ]
    assert [(status, metadata) for _url, status, metadata in tried] == [(404, None), (404, None)]


def test_the_sdk_client_connects_with_its_bearer_token(live_server_url):
    token = make_token(make_tenant("acme"), permissions=["memory:read"]).raw

    async def run():
        async with mcp_client(f"{live_server_url}/mcp/", token) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert {"search_memory", "add_note"} <= asyncio.run(run())


def test_another_tenants_token_gets_no_metadata_on_the_tenant_path_either(live_server_url):
    make_tenant("acme")
    charlie = make_token(make_tenant("charlie"), permissions=["memory:read"]).raw

    async def run():
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = ACCEPT | {"Authorization": f"Bearer {charlie}"}
            return await http.post(f"{live_server_url}/t/acme/mcp/", json=LIST_TOOLS, headers=headers)

    response = asyncio.run(run())
    assert response.status_code == 404
    assert "www-authenticate" not in response.headers
