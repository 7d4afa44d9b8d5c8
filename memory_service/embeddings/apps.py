from django.apps import AppConfig


class EmbeddingsConfig(AppConfig):
    name = "memory_service.embeddings"
    label = "embeddings"
