from django.apps import AppConfig


class SessionContextConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memory_service.session_context"
    label = "session_context"
