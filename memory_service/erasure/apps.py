from django.apps import AppConfig


class ErasureConfig(AppConfig):
    name = "memory_service.erasure"
    label = "erasure"
    verbose_name = "erasure"
