"""ASGI entry point: ``uvicorn memory_service.asgi:application``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")

application = get_asgi_application()
