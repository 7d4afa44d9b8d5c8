"""Hypothesis profiles of the fuzz tests: `fast` (default, part of `make test`) and `full`
(`HYPOTHESIS_PROFILE=full make test PYTEST_ARGS=tests/fuzz`), for a longer search."""

import os

from hypothesis import HealthCheck, settings

# Requests hit a real database: slow examples and function-scoped fixtures (a fresh token per
# test, shared by its examples) are expected.
_QUIET = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much]

# `print_blob`: a failure prints the `@reproduce_failure(...)` line that replays it, so a failure in
# CI (where hypothesis's example database does not survive) reproduces on any machine.
_COMMON = {"deadline": None, "suppress_health_check": _QUIET, "print_blob": True}
settings.register_profile("fast", max_examples=25, stateful_step_count=15, **_COMMON)
# `full`: 600 examples of up to 50 steps, so that the isolation machine runs 20,000 steps or more
# (hypothesis ends an example early now and then).
settings.register_profile("full", max_examples=600, stateful_step_count=50, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

FULL = settings().max_examples > settings.get_profile("fast").max_examples
