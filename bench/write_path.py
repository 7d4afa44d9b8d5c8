"""The write path: the cost of auditing and of a conversation's links, and how soon a write becomes
vector-searchable under load.

    .venv/bin/python bench/write_path.py [--rate 50] [--seconds 45] [--samples 400]

1. Audit cost, in process (no HTTP): ``memory_create`` and ``memory_search`` timed with the audit
   event recorded and with ``audit_event_record`` replaced by a no-op in this process only,
   alternating blocks of 25 in one run so that machine noise hits both alike. The same for a
   conversation's link: ``memory_create`` of notes with their time, one user's turns a second
   apart, each continuing the one before (``services.thread_end``) and with it replaced by a no-op.
2. Write-to-searchable under a steady open-loop write rate through REST (uvicorn + one Celery
   worker with concurrency 2, as ``make run`` starts them): for each write, the time from its
   commit (``created_at``) to its vector's (``MemoryEmbedding.created_at``, stamped just before
   the vector's transaction commits), with each embedding task embedding only its own memory
   (``EMBEDDING_TASK_BATCH=0``) and claiming the tenant's pending backlog (the default, 256).

Uses its own embedded PostgreSQL (port 54334, data in .data/writepath) and Redis database 9.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, start_celery_worker, write_section  # noqa: E402
from bench._stats import percentiles  # noqa: E402
from bench.api_latency import ACTIONS, TOPICS, serve  # noqa: E402

PORT = 8034


def note(rng: random.Random, n: int) -> str:
    topic, action = rng.choice(TOPICS), rng.choice(ACTIONS)
    contact = rng.choice(["", " Ask dev-lead@example.com first.", " Call 090-1234-5678 if it pages."])
    return f"Write {n}: for the {topic} we decided to {action} it after incident {rng.randint(1, 9999)}.{contact}"


@contextmanager
def audit_disabled():
    """Replace the audit service in this process only (never in the service)."""
    import memory_service.memories.services as memory_services
    import memory_service.retrieval.search as search

    saved = memory_services.audit_event_record, search.audit_event_record
    memory_services.audit_event_record = search.audit_event_record = lambda **kwargs: None
    try:
        yield
    finally:
        memory_services.audit_event_record, search.audit_event_record = saved


def audit_cost(samples: int) -> dict:
    from memory_service.memories.services import memory_create
    from memory_service.retrieval.search import memory_search
    from tenants.access import Principal
    from tenants.context import tenant_context
    from tenants.services import tenant_create, token_create

    tenant = tenant_create(slug=f"audit-{int(time.time())}")
    token = token_create(tenant=tenant, actor="system:bench", name="bench", permissions=["memory:read", "memory:write"])
    principal = Principal.from_token(token.token)
    rng = random.Random(3)
    times = {("write", True): [], ("write", False): [], ("search", True): [], ("search", False): []}
    n = 0
    for block in range(2 * samples // 25):
        audited = block % 2 == 0
        with audit_disabled() if not audited else _nothing():
            for _ in range(25):
                n += 1
                started = time.perf_counter()
                with tenant_context(tenant.id):
                    memory_create(principal=principal, scope="repository", repository=f"r{n % 4}", kind="lesson",
                                  text=note(rng, n))  # fmt: skip
                times[("write", audited)].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                with tenant_context(tenant.id):
                    memory_search(principal=principal, query=f"{rng.choice(TOPICS)} {rng.choice(ACTIONS)}",
                                  repository=f"r{n % 4}")  # fmt: skip
                times[("search", audited)].append((time.perf_counter() - started) * 1000)
    return times


@contextmanager
def threads_disabled():
    """Replace ``services.thread_end`` in this process only: no note continues another."""
    import memory_service.memories.services as memory_services

    saved = memory_services.thread_end
    memory_services.thread_end = lambda principal, write: None
    try:
        yield
    finally:
        memory_services.thread_end = saved


def thread_cost(samples: int) -> dict:
    """``memory_create`` of one user's notes said a second apart, each linked to the one before and
    with ``thread_end`` a no-op, in alternating blocks of 25: linked (bool) → milliseconds."""
    from memory_service.memories.services import memory_create
    from tenants.access import Principal
    from tenants.context import tenant_context
    from tenants.services import tenant_create, token_create

    tenant = tenant_create(slug=f"threads-{int(time.time())}")
    token = token_create(tenant=tenant, actor="system:bench", name="bench", permissions=["memory:write"])
    principal = Principal.from_token(token.token)
    rng, said = random.Random(4), datetime(2026, 5, 8, 13, tzinfo=UTC)
    times: dict[bool, list[float]] = {True: [], False: []}
    for block in range(2 * samples // 25):
        linked = block % 2 == 0
        with threads_disabled() if not linked else _nothing():
            for _ in range(25):
                said += timedelta(seconds=1)
                started = time.perf_counter()
                with tenant_context(tenant.id):
                    memory_create(principal=principal, scope="user", user="u1", kind="note",
                                  text=note(rng, int(said.timestamp())), occurred_at=said)  # fmt: skip
                times[linked].append((time.perf_counter() - started) * 1000)
    return times


@contextmanager
def _nothing():
    yield


def start_worker(batch: int, log_path: Path) -> subprocess.Popen:
    """Two embedding workers taking ``batch`` memories per task, on an emptied queue."""
    from memory_service.celery import app

    app.control.purge()
    options = [
        "--loglevel", "WARNING", "--concurrency", "2", "--without-gossip", "--without-mingle", "--hostname",
        f"bench-{batch}@%h",
    ]  # fmt: skip
    env = {"EMBEDDING_TASK_BATCH": str(batch), "OPENBLAS_NUM_THREADS": "1"}
    return start_celery_worker(options, env=env, log_path=log_path)


def steady_writes(url: str, token: str, rate: float, seconds: float, tag: str) -> dict:
    """Open loop: the i-th write is sent at start + i/rate whatever the previous ones do."""
    import httpx

    total = int(rate * seconds)
    latencies, errors, lock = [], [], threading.Lock()
    rng = random.Random(tag)
    texts = [note(rng, n) for n in range(total)]
    start = time.perf_counter() + 0.5
    local = threading.local()

    def send(i: int) -> None:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        began = time.perf_counter()
        response = local.http.post("/api/v1/memories", json={
            "scope": "repository", "repository": f"{tag}-{i % 8}", "kind": "lesson", "text": texts[i],
        })  # fmt: skip
        with lock:
            if response.status_code == 201:
                latencies.append((time.perf_counter() - began) * 1000)
            else:
                errors.append(response.status_code)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=24) as pool:
        list(pool.map(send, range(total)))
    return {"sent": total, "latencies": latencies, "errors": errors, "elapsed": time.perf_counter() - start}


def searchable_lags(tag: str, expected: int, timeout: float = 180) -> tuple[list[float], int]:
    """Seconds from each write's commit to its vector, once all are embedded (or the timeout)."""
    from django.db import connections

    deadline = time.monotonic() + timeout
    while True:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT extract(epoch FROM e.created_at - m.created_at) FROM memories_memory m "
                "JOIN memories_memoryembedding e ON e.memory_id = m.id WHERE m.repository LIKE %s",
                [f"{tag}-%"],
            )
            lags = [float(row[0]) for row in cursor.fetchall()]
        if len(lags) >= expected or time.monotonic() > deadline:
            return lags, expected - len(lags)
        time.sleep(1)


def fmt(samples: list[float], scale: float = 1.0) -> str:
    p50, p95, p99 = percentiles([s * scale for s in samples])
    return f"{p50:.1f} / {p95:.1f} / {p99:.1f}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--samples", type=int, default=400, help="audited and unaudited calls each")
    parser.add_argument("--web-workers", type=int, default=2, help="uvicorn processes (WEB_CONCURRENCY)")
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "write_path.md"))
    return parser.parse_args()


def measure(args) -> tuple[dict, dict, tuple, tuple]:
    """The audit's cost in process, then steady REST writes with each embedding task mode; the
    audit timings, the runs by batch, and the load averages before and after."""
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    os.environ["WEB_CONCURRENCY"] = str(args.web_workers)
    load_before = os.getloadavg()
    with bench_stack("writepath", pg_port=54334, redis_db=9) as profile:
        from django.db import connections

        from tenants.services import tenant_create, token_create

        times = audit_cost(args.samples)
        times |= {("thread", linked): values for linked, values in thread_cost(args.samples).items()}
        tenant = tenant_create(slug=f"w2s-{int(time.time())}")
        token = token_create(tenant=tenant, actor="system:bench", name="bench",
                             permissions=["memory:read", "memory:write"]).raw  # fmt: skip
        connections.close_all()
        server = serve(PORT)
        runs = {}
        try:
            for batch in (0, 256):
                worker = start_worker(batch, profile.dir / "logs" / "worker.log")
                try:
                    tag = f"batch{batch}"
                    result = steady_writes(f"http://127.0.0.1:{PORT}", token, args.rate, args.seconds, tag)
                    lags, missing = searchable_lags(tag, len(result["latencies"]))
                    runs[batch] = result | {"lags": lags, "missing": missing}
                finally:
                    worker.terminate()
                    worker.wait(timeout=60)
        finally:
            server.terminate()
            server.wait(timeout=30)
    load_after = os.getloadavg()
    return times, runs, load_before, load_after


def _cost_tables(times: dict) -> list[str]:
    """The two in-process tables: the audit's cost and a conversation link's, each alternated."""

    def row(name, samples):
        return f"| {name} | {len(samples)} | {fmt(samples)} |"

    w_on, w_off = times[("write", True)], times[("write", False)]
    s_on, s_off = times[("search", True)], times[("search", False)]
    t_on, t_off = times[("thread", True)], times[("thread", False)]
    return [
        "### Cost of auditing (in process, same run, alternating blocks of 25)",
        "",
        "| call | calls | p50 / p95 / p99 ms |",
        "|---|---|---|",
        row("`memory_create` (masking, store, audit, enqueue) — audited", w_on),
        row("`memory_create` — audit replaced by a no-op", w_off),
        row("`memory_search` (embed query, hybrid search, activity, audit) — audited", s_on),
        row("`memory_search` — audit replaced by a no-op", s_off),
        "",
        f"Audit cost: write p50 {statistics.median(w_on) - statistics.median(w_off):+.2f} ms, "
        f"search p50 {statistics.median(s_on) - statistics.median(s_off):+.2f} ms (one INSERT behind a "
        "per-tenant advisory lock, in the caller's transaction).",
        "",
        "### Cost of a conversation's link (in process, same run, alternating blocks of 25)",
        "",
        "| call | calls | p50 / p95 / p99 ms |",
        "|---|---|---|",
        row("`memory_create` of a note with its time, linked to the turn before (`thread_end`)", t_on),
        row("`memory_create` of a note with its time — `thread_end` replaced by a no-op", t_off),
        "",
        f"Link cost: write p50 {statistics.median(t_on) - statistics.median(t_off):+.2f} ms (one statement "
        "reading the owner's notes by kind and time from the index's end, the row it names locked for key "
        "share).",
        "",
    ]


def section(args, times: dict, runs: dict, load_before, load_after) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The RESULTS.md section and the headline figures of a run."""
    w_on, w_off = times[("write", True)], times[("write", False)]
    s_on, s_off = times[("search", True)], times[("search", False)]
    t_on, t_off = times[("thread", True)], times[("thread", False)]
    report = [
        "## Write path: audit cost and write-to-searchable",
        "",
        f"Command: `.venv/bin/python bench/write_path.py --rate {args.rate:g} --seconds {args.seconds:g} "
        f"--samples {args.samples} --web-workers {args.web_workers}` — {datetime.now():%Y-%m-%d %H:%M}, "
        f"{os.cpu_count()} cores, load average "
        f"{load_before[0]:.1f} before and {load_after[0]:.1f} after (the machine is shared).",
        "",
        *_cost_tables(times),
        f"### Write-to-searchable at {args.rate:g} writes/s for {args.seconds:g} s (REST, open loop)",
        "",
        "| embedding tasks | writes 2xx / sent | errors | REST write p50 / p95 / p99 ms | "
        "write → vector p50 / p95 / p99 ms | max s | not embedded after 180 s |",
        "|---|---|---|---|---|---|---|",
    ]
    for batch, run in runs.items():
        name = "each embeds its own memory (`EMBEDDING_TASK_BATCH=0`)" if batch == 0 else (
            f"each claims the tenant's backlog (`EMBEDDING_TASK_BATCH={batch}`, default)"
        )  # fmt: skip
        lag = fmt(run["lags"], scale=1000) if run["lags"] else "—"
        report.append(
            f"| {name} | {len(run['latencies'])} / {run['sent']} | {len(run['errors'])} | {fmt(run['latencies'])} | "
            f"{lag} | {max(run['lags'], default=0):.2f} | {run['missing']} |"
        )
    report += [
        "",
        f"{args.web_workers} uvicorn process(es) and one Celery worker (concurrency 2) on the same 2 cores as "
        "PostgreSQL; "
        "24 client threads in this process send the writes on schedule.",
        "",
    ]
    default_run = runs[max(runs)]
    lag_p50, lag_p95, _ = percentiles(default_run["lags"]) if default_run["lags"] else (float("nan"),) * 3
    figures = [
        (
            "cost of auditing (in process, alternating blocks)",
            f"write p50 {statistics.median(w_on) - statistics.median(w_off):+.1f} ms, "
            f"search p50 {statistics.median(s_on) - statistics.median(s_off):+.1f} ms",
            "",
        ),
        (
            "cost of linking a note with its time to the turn before (in process, alternating blocks)",
            f"write p50 {statistics.median(t_on) - statistics.median(t_off):+.1f} ms",
            "",
        ),
        (
            f"write → vector-searchable at {args.rate:g} writes/s through REST",
            f"p50 {lag_p50 * 1000:.0f} ms, p95 {lag_p95 * 1000:.0f} ms; {default_run['missing']} not embedded",
            "p95 ≤ 2 s",
        ),
    ]
    return report, figures


def main() -> None:
    args = parse_args()
    times, runs, load_before, load_after = measure(args)
    report, figures = section(args, times, runs, load_before, load_after)
    write_section(args.out, report, figures)


if __name__ == "__main__":
    main()
