"""`make bench`'s summaries: built from the figures each benchmark left, naming their commits."""

import json

from bench import update_results as results


def _figures(directory, name, *, commit="abc1234", dirty=False, rows=(("search p50", "20.1 ms", "≤ 20 ms"),)):
    facts = {"commit": commit, "dirty": dirty, "command": f"bench/{name}.py", "date": "2026-12-04 14:00 UTC"}
    (directory / f"{name}.json").write_text(json.dumps(facts | {"figures": [list(r) for r in rows]}))
    (directory / f"{name}.md").write_text(f"## {name}\n\nits section\n")


def _paths(tmp_path, monkeypatch):
    out = tmp_path / "results"
    out.mkdir()
    monkeypatch.setattr(results, "RESULTS_DIR", out)
    monkeypatch.setattr(results, "RESULTS_MD", tmp_path / "RESULTS.md")
    monkeypatch.setattr(results, "README_MD", tmp_path / "README.md")
    (tmp_path / "RESULTS.md").write_text(
        "# Benchmark results\n\n## Summary\n\n<!-- summary: begin -->\nold\n<!-- summary: end -->\n\nprose kept\n"
    )
    (tmp_path / "README.md").write_text(
        "# x\n\n<!-- bench-summary: begin -->\n| typed | 1 |\n<!-- bench-summary: end -->\n\nafter\n"
    )
    return out


def test_the_summaries_of_results_and_readme_are_built_from_the_figures_files(tmp_path, monkeypatch):
    out = _paths(tmp_path, monkeypatch)
    _figures(out, "api_latency", rows=(("REST search", "p50 33.9 ms", ""),))
    _figures(out, "jobs", rows=(("export", "15,000 memories/s", ""), ("refresh", "p50 21 ms", "")))

    updated = results.update_results(["api_latency", "jobs"])

    document = (tmp_path / "RESULTS.md").read_text()
    readme = (tmp_path / "README.md").read_text()
    assert "old" not in document and "prose kept" in document
    assert "| REST search | p50 33.9 ms | — | `api_latency` (abc1234) |" in document
    assert document.index("REST search") < document.index("| export |") < document.index("| refresh |")
    assert "its section" in document  # the sections themselves, between their markers
    assert "| typed | 1 |" not in readme and "after" in readme
    assert "| export | 15,000 memories/s | — |" in readme
    assert "Every section comes from commit `abc1234` with a clean tree." in readme
    assert "README" in updated


def test_sections_from_other_commits_or_a_dirty_tree_are_named(tmp_path, monkeypatch):
    out = _paths(tmp_path, monkeypatch)
    _figures(out, "api_latency", commit="abc1234")
    _figures(out, "jobs", commit="def5678", dirty=True)

    results.update_results([])

    readme = (tmp_path / "README.md").read_text()
    assert "**Not from one commit** — `abc1234`: api_latency; `def5678`: jobs." in readme
    assert "Run with uncommitted changes: jobs." in readme
    assert "`jobs` (def5678, uncommitted changes)" in (tmp_path / "RESULTS.md").read_text()


def test_rows_kept_from_an_earlier_run_name_their_commit_in_the_provenance(tmp_path, monkeypatch):
    out = _paths(tmp_path, monkeypatch)
    _figures(out, "api_latency", commit="abc1234")
    kept = (("search at 10k", "p50 19 ms", ""), ("search at 1M", "p50 24 ms (at 7577ca7)", ""))
    _figures(out, "perf_search", commit="abc1234", rows=kept)

    results.update_results([])

    readme = (tmp_path / "README.md").read_text()
    assert "**Not from one commit** — `7577ca7`: perf_search; `abc1234`: api_latency, perf_search." in readme


def test_a_run_knows_its_commit_and_command(monkeypatch):
    monkeypatch.setattr("sys.argv", [str(results.BENCH / "jobs.py"), "--sizes", "10000"])
    facts = results.run_facts()
    assert facts["command"] == ".venv/bin/python bench/jobs.py --sizes 10000"
    assert len(facts["commit"]) >= 7 and isinstance(facts["dirty"], bool)


def test_a_search_run_of_some_sizes_keeps_the_others_attributed_to_their_commit():
    from bench import perf_search
    from bench.perf import report

    size = {"rest_search": {"overall": {"p50": 21.7, "p95": 29.6}}, "rest_write": {"overall": {"p50": 28.4}}}
    stored = {"command": "perf_search.py --sizes 10000,1000000", "date": "d1", "git": {"head": "old1234"}}
    stored["sizes"] = {"10000": json.loads(json.dumps(size)), "1000000": json.loads(json.dumps(size))}
    perf_search.keep_earlier_runs(stored)
    assert {entry["run"]["git"]["head"] for entry in stored["sizes"].values()} == {"old1234"}
    stored |= {"command": "perf_search.py --sizes 10000", "date": "d2", "git": {"head": "new5678"}}
    stored["sizes"]["10000"]["run"] = {
        "command": "perf_search.py --sizes 10000",
        "date": "d2",
        "git": {"head": "new5678"},
    }  # fmt: skip, as the new run's phase does
    rows = {what: value for what, value, _target in report.headline_figures(stored)}
    assert rows["REST search at 10,000 memories, one client"] == "p50 21.7 ms, p95 29.6 ms"
    assert rows["REST search at 1,000,000 memories, one client"] == "p50 21.7 ms, p95 29.6 ms (at old1234)"
    assert rows["REST write at 1,000,000 memories"] == "p50 28.4 ms (at old1234)"
