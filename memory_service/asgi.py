"""ASGI entry point: ``uvicorn memory_service.asgi:application``.

Django serves the REST API and the admin; the MCP server is mounted beside it (see
memory_service.mcp_server.app).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")

django_application = get_asgi_application()

from memory_service.mcp_server.app import MemoryServiceApp  # noqa: E402  (needs Django set up)

application = MemoryServiceApp(django_application)
