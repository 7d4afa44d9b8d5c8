"""The HTTP client of every REST figure of the search performance suite."""

from __future__ import annotations

import http.client
import json

from bench.perf.stack import WEB_PORT

BASE_URL = f"http://127.0.0.1:{WEB_PORT}"


class Response:
    def __init__(self, status_code: int, body: bytes):
        self.status_code = status_code
        self.content = body

    def json(self):
        return json.loads(self.content)


class KeepAliveClient:
    """One keep-alive HTTP/1.1 connection with the standard library's ``http.client``, the client
    of every REST figure: its own work per request is less than ``httpx``'s (both run on one machine
    with the server, so the client's time is in every latency measured; the two are compared by
    ``measure.http_search(..., also_httpx=True)``). ``request``/``post`` answer like httpx's."""

    def __init__(self, base_url: str = BASE_URL, timeout: float = 30):
        host, _, port = base_url.removeprefix("http://").partition(":")
        self.connection = http.client.HTTPConnection(host, int(port or 80), timeout=timeout)

    def request(self, method: str, path: str, *, json_body=None, headers: dict | None = None) -> Response:
        headers = dict(headers or {})
        body = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        return Response(response.status, response.read())

    def post(self, path: str, *, json=None, headers: dict | None = None) -> Response:  # noqa: A002 (httpx's name)
        return self.request("POST", path, json_body=json, headers=headers)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
