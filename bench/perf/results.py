"""bench/perf/results.json: every figure of the search performance suite, read and written whole."""

import json
from pathlib import Path

RESULTS_FILE = Path(__file__).resolve().parent / "results.json"


def load_results() -> dict:
    return json.loads(RESULTS_FILE.read_text()) if RESULTS_FILE.exists() else {"sizes": {}}


def save_results(results: dict) -> None:
    RESULTS_FILE.write_text(json.dumps(results, indent=1, default=str))
