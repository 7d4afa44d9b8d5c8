from django.apps import AppConfig
from django.conf import settings
from django.core import checks


class EmbeddingsConfig(AppConfig):
    name = "memory_service.embeddings"
    label = "embeddings"

    def ready(self):
        checks.register(rescore_backend_check)


def rescore_backend_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``EMBEDDING_RESCORE_BACKEND`` names an in-process model other than the active one (checked
    by ``migrate`` and ``check``, so ``make run`` and Compose stop before serving a search that
    would fail)."""
    from memory_service.embeddings.backends import RESCORE_BACKENDS

    name = settings.EMBEDDING_RESCORE_BACKEND
    if not name:
        return []
    if name not in RESCORE_BACKENDS:
        return [
            checks.Error(
                f"EMBEDDING_RESCORE_BACKEND={name!r} is not an in-process model.",
                hint=f"Use one of: {', '.join(RESCORE_BACKENDS)}, or leave it empty.",
                id="embeddings.E001",
            )
        ]
    if name == settings.EMBEDDING_BACKEND:
        return [
            checks.Error(
                "EMBEDDING_RESCORE_BACKEND must differ from EMBEDDING_BACKEND.",
                hint="Leave it empty, or name the other in-process model.",
                id="embeddings.E002",
            )
        ]
    return []
