"""Figures shared by the benchmarks."""

from pathlib import Path


def concurrency_plot(levels: list[dict], path: Path, *, title: str, limit_ms: float) -> bool:
    """Latency (all requests' p50 / p95 / p99, searches' and writes' p95) and throughput against
    concurrent clients, saved as ``path``; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    xs = [level["concurrency"] for level in levels]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, style in (("p50", "o-"), ("p95", "o--"), ("p99", "o:")):
        ax.plot(xs, [level[key] for level in levels], style, label=f"all requests {key}", color="C0")
    ax.plot(xs, [level["search_p95"] for level in levels], "s--", label="search p95", color="C2")
    ax.plot(xs, [level["write_p95"] for level in levels], "^--", label="write p95", color="C3")
    ax.axhline(limit_ms, color="grey", lw=0.8, ls="-.")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="concurrent clients", ylabel="latency (ms)", title=title)
    twin = ax.twinx()
    twin.plot(xs, [level["throughput"] for level in levels], "k-", alpha=0.4, label="throughput")
    twin.set_ylabel("requests/s")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True
