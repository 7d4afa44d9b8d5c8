"""Wall and CPU time of the English name tier per note, with the BLAS threads the environment gives.

    OPENBLAS_NUM_THREADS=2 .venv/bin/python -m bench.perf.ner_threads
    .venv/bin/python -m bench.perf.ner_threads          # the service's default: one thread

500 notes of ``bench/_notes.py`` through ``EnglishNames.find`` in one batch (50 first,
not counted); prints ms per note of wall time and of this process's CPU time, and the BLAS threads.
No database.
"""

import argparse
import os
import random
import time

import memory_service  # noqa: F401  (sets the process's BLAS threads before numpy loads)
from bench._notes import make_note
from memory_service.pii.engine import installed_name_finders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    from threadpoolctl import threadpool_info

    finder = installed_name_finders()["en"]
    rng = random.Random(1)
    texts = [make_note(rng, "en", i)[1] for i in range(550)]
    finder.find(texts[:50])
    wall, cpu = time.perf_counter(), time.process_time()
    finder.find(texts[50:])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    threads = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
    print(
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} (BLAS threads {threads}): "
        f"wall {wall * 1000 / 500:.2f} ms, CPU {cpu * 1000 / 500:.2f} ms per note"
    )


if __name__ == "__main__":
    main()
