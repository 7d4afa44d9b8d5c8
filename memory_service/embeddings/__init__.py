"""Text → vectors, through one pluggable backend chosen by settings (see backends.py)."""

from memory_service.embeddings.backends import EmbeddingBackend, EmbeddingUnavailable, get_backend

__all__ = ["EmbeddingBackend", "EmbeddingUnavailable", "get_backend"]
