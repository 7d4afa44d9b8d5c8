"""Process-wide settings that the service's processes (web, workers, commands) start with."""

import json
import os
import subprocess
import sys


def _blas_threads(env: dict) -> list[int]:
    script = (
        "import json, memory_service, numpy, threadpoolctl;"
        "print(json.dumps([i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas']))"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_process_multiplies_matrices_on_one_thread_unless_told_otherwise():
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    assert _blas_threads(env) == [1]
    assert _blas_threads(env | {"OPENBLAS_NUM_THREADS": "2"}) == [min(2, os.cpu_count() or 1)]  # an operator's say
