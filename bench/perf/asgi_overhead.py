"""Fixed per-request cost of the web stack: the same requests through Django's WSGI handler and its
ASGI handler, in process (no socket), counting the PostgreSQL connections each request opens.

    BENCH_APP_DIR=.data/bench/app-<commit> .venv/bin/python -m bench.perf.asgi_overhead

Starts the bench PostgreSQL if needed and stops it again if it started it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import time

from bench._stats import summary
from bench.perf import corpus, measure, stack
from bench.perf.results import load_results, save_results


def wsgi_times(requests: list[tuple], created: list) -> dict:
    """Each of ``requests`` 120 times through Django's WSGI handler (the first 20 not counted)."""
    from django.core.handlers.wsgi import WSGIHandler

    wsgi = WSGIHandler()
    out = {}
    for method, path, headers in requests:
        times = []
        created.clear()
        for k in range(120):
            environ = {
                "REQUEST_METHOD": method,
                "PATH_INFO": path.split("?")[0],
                "QUERY_STRING": path.split("?")[1] if "?" in path else "",
                "SERVER_NAME": "127.0.0.1",
                "SERVER_PORT": "80",
                "wsgi.input": io.BytesIO(b""),
                "wsgi.url_scheme": "http",
                "wsgi.errors": sys.stderr,
                "HTTP_HOST": "127.0.0.1",
                **headers,
            }
            t = time.perf_counter()
            body = b"".join(wsgi(environ, lambda status, hdrs, exc=None: None))
            if k >= 20:
                times.append((time.perf_counter() - t) * 1000)
        assert body, path
        out[f"WSGI {method} {path}"] = summary(times) | {"new_db_connections": len(created)}
    return out


async def asgi_run(app, method, path, headers) -> list[float]:
    """One request 120 times through the ASGI application in process (the first 20 not counted)."""
    import httpx

    times = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        for k in range(120):
            t = time.perf_counter()
            response = await c.request(method, path, headers=headers)
            if k >= 20:
                times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, response.status_code
    return times


async def asgi_search(app, search_items: list[dict]) -> list[float]:
    """The searches of ``search_items`` through the ASGI application in process (the first 20 not counted)."""
    import httpx

    times = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        for k, item in enumerate(search_items):
            body = {"query": item["query"], "user": item["user"], "repository": item["repository"]}
            t = time.perf_counter()
            response = await c.post("/api/v1/search", json=body, headers={"Authorization": f"Bearer {item['token']}"})
            if k >= 20:
                times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, response.status_code
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", action="store_true", help="Django's psycopg pool instead of persistent connections")
    pool = parser.parse_args().pool
    with stack.database():
        if pool:  # Django 5.1+ native psycopg pool instead of per-thread persistent connections
            from django.conf import settings

            for alias in ("default", "admin"):
                settings.DATABASES[alias]["CONN_MAX_AGE"] = 0
                settings.DATABASES[alias].setdefault("OPTIONS", {})["pool"] = {"min_size": 2, "max_size": 8}
        from django.core.asgi import get_asgi_application
        from django.db.backends.signals import connection_created

        created = []
        connection_created.connect(lambda sender, connection, **kw: created.append(connection.alias), weak=False)
        tokens = json.loads(stack.TOKENS_FILE.read_text())
        token = list(tokens.values())[-1 if pool else 0]["token"]
        requests = [
            ("GET", "/healthz", {}),
            ("GET", "/api/v1/memories?limit=1", {"HTTP_AUTHORIZATION": f"Bearer {token}"}),
        ]
        search_items = measure.workload(corpus.tenant_specs(), tokens, 10_000, 120, seed=55)
        out = wsgi_times(requests, created)
        app = get_asgi_application()
        for method, path, headers in requests:
            created.clear()
            hdrs = {"Authorization": headers["HTTP_AUTHORIZATION"]} if headers else {}
            times = asyncio.run(asgi_run(app, method, path, hdrs))
            out[f"ASGI {method} {path}"] = summary(times) | {"new_db_connections": len(created)}
        created.clear()
        out["ASGI POST /api/v1/search"] = summary(asyncio.run(asgi_search(app, search_items))) | {
            "new_db_connections": len(created)
        }
        print(json.dumps(out, indent=1))
        results = load_results()
        results["asgi_overhead_pool" if pool else "asgi_overhead"] = out | {
            "command": "cd /work/main && BENCH_APP_DIR=.data/bench/app-748483a "
            ".venv/bin/python -m bench.perf.asgi_overhead" + (" --pool" if pool else ""),
            "note": "120 requests each, first 20 not counted; new_db_connections counts all 120",
        }
        save_results(results)


if __name__ == "__main__":
    main()
