"""ASGI entry point: ``uvicorn memory_service.asgi:application``.

Django serves the REST API and the admin through its WSGI handler, run in a pool of threads by
a2wsgi; the MCP server is mounted beside it (see memory_service.mcp_server.app).

Why WSGI inside an ASGI server: every view and middleware of the API is synchronous. Django's
ASGI handler hands each synchronous middleware's ``process_request`` and ``process_response`` to
a thread and back, a dozen hops per request; the WSGI handler runs the whole request in one
thread, once: several milliseconds less per request, measured in process on the same requests
(bench/RESULTS.md, "Web stack").
"""

import os

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")

# As many request threads as pooled database connections: a thread never waits for a connection.
django_application = WSGIMiddleware(get_wsgi_application(), workers=settings.DB_POOL_MAX_SIZE)

from memory_service.mcp_server.app import MemoryServiceApp  # noqa: E402  (needs Django set up)
from memory_service.pii.helper import shared_helper  # noqa: E402

if settings.PII_HELPER_PROCESS:
    shared_helper().start()  # bulk writes mask on two cores; it loads while the server starts

application = MemoryServiceApp(django_application)
