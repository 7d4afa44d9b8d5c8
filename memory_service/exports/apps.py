from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "memory_service.exports"
    label = "exports"
    verbose_name = "Compliance exports"
