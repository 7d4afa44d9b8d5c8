import os

# One BLAS thread per process, unless the environment says otherwise (OpenBLAS reads it when numpy
# loads, so it is set before anything imports numpy). The name tier's model and the embedders
# multiply small matrices: a second thread saves ~5 % of a note's time and keeps a second core
# spinning, which starves the other web processes and Celery children that concurrency comes from
# (bench/RESULTS.md, "Bulk writes").
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from memory_service.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
