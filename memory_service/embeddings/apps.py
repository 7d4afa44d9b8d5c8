from django.apps import AppConfig
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
    from memory_service.embeddings.backends import rescore_setting_problem

    problem = rescore_setting_problem()
    if problem is None:
        return []
    check_id, message, hint = problem
    return [checks.Error(message, hint=hint, id=check_id)]
