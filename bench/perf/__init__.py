"""Search performance benchmark helpers (see bench/perf_search.py).

BENCH_APP_DIR, when set, is a frozen copy of the application (``git archive <commit>``) that is
imported instead of the working tree, so that edits made by others during a run do not change
the code under test.
"""

import os
import sys

_app_dir = os.environ.get("BENCH_APP_DIR")
if _app_dir and _app_dir not in sys.path:
    sys.path.insert(0, _app_dir)
