"""`make bench`'s runner reaches every benchmark, and the benchmark code keeps to the house's sizes."""

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from bench import _stats, run_all, update_results
from bench.update_results import FIGURE_SOURCES

BENCH = Path(run_all.__file__).resolve().parent
# Scripts under bench/ that measure nothing: the runner itself, the summary builder, the dataset
# checkers and the name lexicon's builder.
NOT_BENCHMARKS = {"run_all.py", "update_results.py", "pii/build_name_lexicon.py"}


def _scripts() -> set[str]:
    """Every script under bench/ (a module that runs as ``__main__``), relative to bench/."""
    found = set()
    for path in BENCH.rglob("*.py"):
        relative = str(path.relative_to(BENCH))
        if relative.startswith("datasets/") or relative in NOT_BENCHMARKS:
            continue
        if '__name__ == "__main__"' in path.read_text():
            found.add(relative)
    return found


def _program(command: list[str]) -> str:
    """The script a registered command runs, relative to bench/."""
    if command[1] == "-m":
        return command[2].removeprefix("bench.").replace(".", "/") + ".py"
    return command[1].removeprefix("bench/")


def test_it_names_every_benchmark_script():
    registered = {_program(command) for command in [*run_all.BENCHMARKS.values(), *run_all.EXPERIMENTS.values()]}

    assert _scripts() - registered == set()
    assert registered - _scripts() == set()


def test_it_keeps_make_bench_to_the_benchmarks_that_write_a_section():
    assert not set(run_all.BENCHMARKS) & set(run_all.EXPERIMENTS)
    assert set(run_all.BENCHMARKS) == set(FIGURE_SOURCES)


def test_it_runs_a_benchmark_with_its_own_arguments_or_with_those_given():
    assert run_all.command("jobs", [])[1:] == ["bench/jobs.py", "--sizes", "10000,50000", "--refreshes", "30"]
    assert run_all.command("jobs", ["--sizes", "10000"])[1:] == ["bench/jobs.py", "--sizes", "10000"]
    assert run_all.command("ab_rest", ["old", "new", "--rounds", "6"])[1:] == [
        "-m",
        "bench.perf.ab_rest",
        "old",
        "new",
        "--rounds",
        "6",
    ]


@pytest.mark.parametrize(
    "argv",
    [["--only", "no_such_benchmark"], ["--only", "jobs,pii", "--", "--sizes", "10000"]],
    ids=["unknown name", "arguments for two"],
)
def test_it_refuses_what_it_cannot_run(monkeypatch, capsys, argv):
    monkeypatch.setenv(update_results.CODE_ENV, json.dumps({"commit": "abc1234", "dirty": False}))
    monkeypatch.setattr(sys, "argv", ["bench/run_all.py", "--allow-dirty", *argv])

    with pytest.raises(SystemExit) as exit_:
        run_all.parse_args()

    assert exit_.value.code == 2
    assert re.search(r"unknown benchmark\(s\): no_such_benchmark|arguments after -- go to one", capsys.readouterr().err)


def test_a_run_names_the_commit_it_started_from_not_one_made_while_it_ran(monkeypatch):
    monkeypatch.setenv(update_results.CODE_ENV, "")
    monkeypatch.delenv(update_results.CODE_ENV)
    monkeypatch.setattr(update_results, "_code", lambda: {"commit": "abc1234", "dirty": False})
    started = update_results.pin_run_code()

    monkeypatch.setattr(update_results, "_code", lambda: {"commit": "def5678", "dirty": True})
    facts = update_results.run_facts()

    assert started == {"commit": "abc1234", "dirty": False}
    assert (facts["commit"], facts["dirty"]) == ("abc1234", False)
    assert json.loads(update_results.os.environ[update_results.CODE_ENV])["commit"] == "abc1234"  # for its benchmarks


def test_its_modules_stay_under_four_hundred_lines_and_functions_under_eighty():
    too_long = []
    for path in BENCH.rglob("*.py"):
        source = path.read_text()
        if source.count("\n") > 400:
            too_long.append(f"{path.relative_to(BENCH)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                too_long.append(f"{path.relative_to(BENCH)}: {node.name}() {node.end_lineno - node.lineno + 1} lines")

    assert too_long == []


def test_the_shared_percentiles_keep_each_convention():
    sample = [float(n) for n in range(1, 101)]

    assert _stats.pct(sample, 0.5) == 50.5  # interpolated
    assert _stats.pct(sample, 0.95) == 95.05
    assert _stats.pct([], 0.5) is None
    assert _stats.summary([1.0, 2.0, 4.0]) == {"n": 3, "p50": 2.0, "p95": 3.8, "mean": 2.33}
    assert _stats.percentiles(sample) == (50.5, 96.0, 100.0)  # median, then nearest rank above
    assert _stats.median_of([3.0, None, 1.0, 2.0]) == 2.0
    assert _stats.median_of([None]) is None
