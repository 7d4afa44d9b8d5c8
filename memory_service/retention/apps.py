from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "memory_service.retention"
    label = "retention"
    verbose_name = "retention"
