"""Put each benchmark's latest section (``bench/results/<name>.md``) into ``bench/RESULTS.md``.

A section lives between ``<!-- <name>: begin -->`` and ``<!-- <name>: end -->``; what is outside
the markers (the summary, the reading of the figures, decisions) is kept. A section without
markers yet is appended. The ``machine`` block records the date, commit and machine facts.
"""

import os
import platform
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS_DIR = BENCH / "results"
RESULTS_MD = BENCH / "RESULTS.md"
SECTIONS = [
    "machine",
    "retrieval_quality",
    "api_latency",
    "pii",
    "write_path",
    "bulk_profile",
    "bulk_ingest",
    "load_test",
    "jobs",
    "web_stack",
]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> str:
    try:
        kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")))  # fmt: skip
        return f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        return "unknown"


def machine_section(refreshed: list[str]) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=BENCH, capture_output=True, text=True)
    load = os.getloadavg()
    return "\n".join([
        f"Last benchmark run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit "
        f"`{commit.stdout.strip() or 'unknown'}`; {os.cpu_count()} cores ({_cpu_model()}), {_memory_gib()}, "
        f"Python {platform.python_version()}, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end "
        "(the machine is shared, so compare figures of one run, not across runs). Sections refreshed by it: "
        f"{', '.join(refreshed) or 'none'}.",
        "",
    ])  # fmt: skip


def _splice(document: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(document):
        return pattern.sub(lambda _: block, document)
    return document.rstrip() + "\n\n" + block + "\n"


def update_results(refreshed: list[str] | None = None) -> list[str]:
    """Splice every available section into RESULTS.md; returns the names updated. ``refreshed``
    names the benchmarks of this run (recorded in the machine block)."""
    document = RESULTS_MD.read_text() if RESULTS_MD.exists() else "# Benchmark results\n"
    updated = []
    for name in SECTIONS:
        if name == "machine":
            body = machine_section(refreshed or [])
        else:
            path = RESULTS_DIR / f"{name}.md"
            if not path.exists():
                continue
            body = path.read_text()
        document = _splice(document, name, body)
        updated.append(name)
    RESULTS_MD.write_text(document)
    return updated


if __name__ == "__main__":
    print("updated:", ", ".join(update_results()))
