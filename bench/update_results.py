"""Put each benchmark's latest section (``bench/results/<name>.md``) into ``bench/RESULTS.md``,
and build the summary tables of RESULTS.md and the README from the same run.

A section lives between ``<!-- <name>: begin -->`` and ``<!-- <name>: end -->``; what is outside
the markers (the reading of the figures, decisions, experiments that compared two commits) is
kept. A section without markers yet is appended. Each benchmark also leaves ``<name>.json``: its
headline figures, with the commit and command that produced them (``_stack.write_section``). The
``summary`` block of RESULTS.md and the ``bench-summary`` block of the README are built from those
files alone, so no figure in them is typed by hand; the ``machine`` block says whether every
section came from one commit with a clean tree, and names those that did not.
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS_DIR = BENCH / "results"
RESULTS_MD = BENCH / "RESULTS.md"
README_MD = BENCH.parent / "README.md"
# What a figure depends on: a change here makes a tree "dirty" for the results.
MEASURED_PATHS = ("memory_service", "tenants", "audit", "bench", "requirements", "pyproject.toml")
# What a run writes itself.
RESULT_PATHS = ("bench/RESULTS.md", "bench/results", "bench/perf/results.json", "bench/perf/search_latency.png")
# The sections, in the order of the summary tables ("perf_search" writes its section itself).
SECTIONS = [
    "machine",
    "summary",
    "retrieval_quality",
    "rest_quality",
    "api_latency",
    "pii",
    "write_path",
    "bulk_profile",
    "bulk_ingest",
    "load_test",
    "load_search",
    "jobs",
    "web_stack",
]
# Where a run's starting commit is kept (``pin_run_code``).
CODE_ENV = "BENCH_RUN_CODE"
FIGURE_SOURCES = [name for name in SECTIONS if name not in ("machine", "summary")] + ["perf_search"]


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=BENCH.parent, capture_output=True, text=True)
    return done.stdout.strip()


def _code() -> dict:
    return {
        "commit": _git("rev-parse", "--short", "HEAD") or "unknown",
        "dirty": bool(
            _git("status", "--porcelain", "--", *MEASURED_PATHS, *(f":(exclude){path}" for path in RESULT_PATHS))
        ),
    }


def pin_run_code() -> dict:
    """The commit and dirtiness of the working tree as this run starts, kept in ``CODE_ENV`` for
    ``run_facts`` and the benchmarks it starts: a commit made while a run goes on does not take
    its figures. A run started by another keeps the first one's."""
    if CODE_ENV not in os.environ:
        os.environ[CODE_ENV] = json.dumps(_code())
    return json.loads(os.environ[CODE_ENV])


def run_facts() -> dict:
    """The commit and whether the measured files differ from it, as the run started
    (``pin_run_code``), the command and the time of this run."""
    argv0 = Path(sys.argv[0]).resolve()
    script = str(argv0.relative_to(BENCH.parent)) if argv0.is_relative_to(BENCH.parent) else sys.argv[0]
    return pin_run_code() | {
        "command": " ".join([".venv/bin/python", script, *sys.argv[1:]]),
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
    }


def load_figures() -> dict[str, dict]:
    """Each benchmark's figures file (``bench/results/<name>.json``) that exists, by name."""
    found = {}
    for name in FIGURE_SOURCES:
        path = RESULTS_DIR / f"{name}.json"
        if path.exists():
            found[name] = json.loads(path.read_text())
    return found


def summary_table(figures: dict[str, dict], *, with_source: bool) -> str:
    """The headline figures of every benchmark as one markdown table."""
    header = "| what | figure | target |" + (" benchmark (commit) |" if with_source else "")
    lines = [header, "|---|---|---|" + ("---|" if with_source else "")]
    for name, facts in figures.items():
        source = f" `{name}` ({facts['commit']}{', uncommitted changes' if facts['dirty'] else ''}) |"
        for what, figure, target in facts["figures"]:
            lines.append(f"| {what} | {figure} | {target or '—'} |" + (source if with_source else ""))
    return "\n".join(lines) + "\n"


# A figure kept from an earlier run says so: "p50 24.4 ms (at 7577ca7)" (``bench/perf/report.py``).
_KEPT_FROM = re.compile(r"\(at ([0-9a-f]{7,40})\)")


def _commits(facts: dict) -> list[str]:
    """The commits a benchmark's figures come from: its run's, and those its kept rows name."""
    kept = {match for _what, figure, _target in facts["figures"] for match in _KEPT_FROM.findall(figure)}
    return sorted({facts["commit"]} | kept)


def provenance(figures: dict[str, dict]) -> str:
    """One sentence: whether every section, and every row kept from an earlier run, came from one
    commit with a clean tree."""
    commits = sorted({commit for facts in figures.values() for commit in _commits(facts)})
    dirty = sorted(name for name, facts in figures.items() if facts["dirty"])
    if len(commits) == 1 and not dirty:
        return f"Every section comes from commit `{commits[0]}` with a clean tree."
    by_commit = "; ".join(
        f"`{commit}`: {', '.join(n for n, f in figures.items() if commit in _commits(f))}" for commit in commits
    )
    tail = f" Run with uncommitted changes: {', '.join(dirty)}." if dirty else ""
    return f"**Not from one commit** — {by_commit}.{tail}"


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


def machine_section(refreshed: list[str], figures: dict[str, dict]) -> str:
    load = os.getloadavg()
    return "\n".join([
        f"Last benchmark run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit "
        f"`{_git('rev-parse', '--short', 'HEAD') or 'unknown'}`; {os.cpu_count()} cores ({_cpu_model()}), "
        f"{_memory_gib()}, Python {platform.python_version()}, load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} at the end (the machine is shared, so compare figures of one run, not across runs). "
        f"Sections refreshed by it: {', '.join(refreshed) or 'none'}. {provenance(figures) if figures else ''}",
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
    figures = load_figures()
    updated = []
    for name in SECTIONS:
        if name == "machine":
            body = machine_section(refreshed or [], figures)
        elif name == "summary":
            if not figures:
                continue
            body = summary_table(figures, with_source=True)
        else:
            path = RESULTS_DIR / f"{name}.md"
            if not path.exists():
                continue
            body = path.read_text()
        document = _splice(document, name, body)
        updated.append(name)
    RESULTS_MD.write_text(document)
    if figures and README_MD.exists():
        readme = README_MD.read_text()
        body = provenance(figures) + "\n\n" + summary_table(figures, with_source=False)
        if "<!-- bench-summary: begin -->" in readme:
            README_MD.write_text(_splice(readme, "bench-summary", body))
            updated.append("README")
    return updated


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print("updated:", ", ".join(update_results()))
