"""The figures of a sample that every benchmark reports: percentiles, medians and summaries.

Two percentile conventions are in use and kept apart, since each benchmark's figures were always
computed with its own: ``pct``/``summary`` interpolate between the two nearest samples (the search
performance suite and its A/B scripts); ``percentiles`` picks the nearest rank above (the
application-level benchmarks: API latency, web stack, write path, load test).
"""

import math
import statistics


def pct(values, q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values``, interpolated linearly, rounded to 2 decimals;
    None for no values."""
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return round(values[lo] + (values[hi] - values[lo]) * (k - lo), 2)


def summary(values) -> dict:
    """``n``, interpolated ``p50`` and ``p95``, and the ``mean`` (2 decimals; None for no values)."""
    return {
        "n": len(values),
        "p50": pct(values, 0.5),
        "p95": pct(values, 0.95),
        "mean": round(statistics.fmean(values), 2) if values else None,
    }


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    """The median, and the 95th and 99th percentiles by nearest rank above, of a non-empty sample."""
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return statistics.median(ordered), pick(0.95), pick(0.99)


def median_of(values: list) -> float | None:
    """The median of the values that are not None, rounded to 2 decimals; None when there are none."""
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None
