import asyncio
import json
from contextlib import asynccontextmanager

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def mcp_client(url: str, token: str | None):
    """The SDK's own client over streamable HTTP, with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def _outcome(result):
    """(is_error, payload) of one tool result: the structured result, or the text (parsed if JSON)."""
    if result.structured_content is not None and not result.is_error:
        payload = result.structured_content
        return False, payload.get("result", payload) if set(payload) == {"result"} else payload
    text = "".join(getattr(block, "text", "") for block in result.content)
    try:
        return bool(result.is_error), json.loads(text)
    except ValueError:
        return bool(result.is_error), text


def call(url: str, token: str, tool: str, arguments: dict):
    """Call one tool; returns (is_error, payload) where payload is the structured or text result."""

    async def run():
        async with mcp_client(url, token) as client:
            return await client.call_tool(tool, arguments)

    return _outcome(asyncio.run(run()))


def call_many(url: str, token: str, calls: list[tuple[str, dict]]) -> list:
    """Call several tools, in order, in one session; a (is_error, payload) per call, as ``call``."""

    async def run():
        async with mcp_client(url, token) as client:
            return [await client.call_tool(tool, arguments) for tool, arguments in calls]

    return [_outcome(result) for result in asyncio.run(run())]
