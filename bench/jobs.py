"""Background jobs: compliance-export throughput and session-context refresh latency.

For each size, seeds one tenant with N memories (bulk insert as the schema's tables hold them:
masked text is just the text here, the notes carry no PII) over 20 repositories and 50 users,
then

- builds a whole-tenant export with the worker's own code (``export_job_run``: claim, lease
  heartbeat, REPEATABLE READ snapshot, streamed JSON Lines into a zip, atomic rename) and a
  one-user export, and reports memories per second and the archive size;
- refreshes one stored session-context digest (user, repository) again and again through
  ``refresh_coalesced`` (Redis lock, render, store), as the worker does after a write.

    .venv/bin/python bench/jobs.py [--sizes 10000,50000] [--refreshes 30]

Uses its own embedded PostgreSQL (port 54333, data in .data/jobs) and Redis database 8.
"""

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, start_celery_worker, write_section  # noqa: E402

TOPICS = ["connection pool", "flaky test", "deploy", "migration", "cache", "rate limit", "feature flag", "CI",
          "logging", "retry", "timeout", "schema", "index", "queue", "auth token", "docker", "backup"]  # fmt: skip
KINDS = ["lesson", "note", "conclusion", "decision", "knowledge"]


def seed(size: int):
    from django.db import connections

    from memory_service.memories.models import Memory
    from tenants.context import tenant_context
    from tenants.services import tenant_create

    tenant = tenant_create(slug=f"jobs-{size}-{int(time.time())}")
    rng = random.Random(size)
    batch = 5000
    with tenant_context(tenant.id):
        for start in range(0, size, batch):
            rows = []
            for i in range(start, min(start + batch, size)):
                user = f"user-{i % 50}"
                topic = rng.choice(TOPICS)
                text = (
                    f"Note {i}: for the {topic} we decided to change the defaults after incident "
                    f"{rng.randint(1, 999)}; the fix is in the runbook and the alert now pages the owner."
                )
                scoped = {"scope": "user", "user": user} if i % 5 == 0 else {"scope": "repository",
                                                                            "repository": f"repo-{i % 20}"}  # fmt: skip
                rows.append(
                    Memory(
                        tenant=tenant,
                        author=user,
                        kind=rng.choice(KINDS),
                        text=text,
                        title=f"{topic} {i}",
                        tags=[topic.replace(" ", "-")],
                        dedup_key=uuid.uuid4().hex,
                        masker_version="bench",
                        **scoped,
                    )  # fmt: skip
                )
            Memory.objects.bulk_create(rows, batch_size=batch)
    with connections["admin"].cursor() as cursor:
        cursor.execute("ANALYZE")
    return tenant


def time_export(tenant, user: str = "") -> dict:
    from memory_service.exports.services import export_job_run, export_job_start

    job = export_job_start(tenant=tenant, actor="system:bench", user=user, enqueue=False)
    started = time.perf_counter()
    job = export_job_run(tenant_id=tenant.id, job_id=job.id)
    seconds = time.perf_counter() - started
    memories = job.counts["memories"]
    return {"memories": memories, "seconds": seconds, "rate": memories / seconds, "mib": job.size_bytes / 2**20}


def start_worker():
    """A Celery worker on the exports queue, as deployed (prefork, one child)."""
    options = ["-Q", "exports", "--concurrency", "1", "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
    return start_celery_worker(options)


def time_worker_export(tenant) -> dict:
    """A whole-tenant export through the queue and the worker: from the committed job to ``succeeded``."""
    from memory_service.exports.models import ExportJob
    from memory_service.exports.services import export_job_start
    from tenants.context import tenant_context

    job = export_job_start(tenant=tenant, actor="system:bench", enqueue=True)
    while True:
        with tenant_context(tenant.id):
            job = ExportJob.objects.get(id=job.id)
        if job.status in ("succeeded", "failed"):
            break
        time.sleep(0.05)
    assert job.status == "succeeded"
    seconds = (job.finished_at - job.created_at).total_seconds()
    memories = job.counts["memories"]
    return {"memories": memories, "seconds": seconds, "rate": memories / seconds, "mib": job.size_bytes / 2**20}


def time_refresh(tenant, refreshes: int) -> list[float]:
    from django.test import override_settings

    from memory_service.session_context.services import refresh_coalesced, request_refresh

    samples = []
    with override_settings(SESSION_CONTEXT_DEBOUNCE_SECONDS=0):
        for _ in range(refreshes + 3):
            request_refresh(tenant_id=tenant.id, user="user-1", repository="repo-1")
            started = time.perf_counter()
            assert refresh_coalesced(tenant_id=str(tenant.id), user="user-1", repository="repo-1") == 1
            samples.append((time.perf_counter() - started) * 1000)
    return samples[3:]  # warm-up excluded


def measure(size: int, args, rows_export: list, rows_refresh: list, figures: list) -> None:
    started = time.perf_counter()
    tenant = seed(size)
    print(f"seeded {size} in {time.perf_counter() - started:.1f} s", flush=True)
    whole = time_export(tenant)
    one = time_export(tenant, user="user-1")
    queued = time_worker_export(tenant)
    rows_export.append(
        f"| {size:,} | whole tenant | {whole['memories']:,} | {whole['seconds']:.2f} | {whole['rate']:,.0f} "
        f"| {whole['mib']:.1f} |"
    )
    rows_export.append(
        f"| {size:,} | one user | {one['memories']:,} | {one['seconds']:.2f} | {one['rate']:,.0f} | {one['mib']:.2f} |"
    )
    rows_export.append(
        f"| {size:,} | whole tenant, through the queue and a worker | {queued['memories']:,} | "
        f"{queued['seconds']:.2f} | {queued['rate']:,.0f} | {queued['mib']:.1f} |"
    )
    samples = sorted(time_refresh(tenant, args.refreshes))
    p95 = samples[min(len(samples) - 1, int(0.95 * len(samples)))]
    figures.append((f"compliance export of a tenant of {size:,}", f"{whole['rate']:,.0f} memories/s "
                    f"({queued['rate']:,.0f}/s through the queue and a worker)", ""))  # fmt: skip
    figures.append((f"session-context refresh, tenant of {size:,}", f"p50 {statistics.median(samples):.1f} ms, "
                    f"p95 {p95:.1f} ms", ""))  # fmt: skip
    rows_refresh.append(
        f"| {size:,} | {len(samples)} | {statistics.median(samples):.1f} | {p95:.1f} | {samples[-1]:.1f} |"
    )
    print(*rows_export[-3:], rows_refresh[-1], sep="\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--refreshes", type=int, default=30)
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "jobs.md"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows_export, rows_refresh, figures = [], [], []
    with bench_stack("jobs", pg_port=54333, redis_db=8):
        worker = start_worker()
        try:
            for size in sizes:
                measure(size, args, rows_export, rows_refresh, figures)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    report = [
        "## Jobs: export throughput and session-context refresh",
        "",
        f"Command: `.venv/bin/python bench/jobs.py --sizes {args.sizes} --refreshes {args.refreshes}` — "
        f"{datetime.now():%Y-%m-%d}, {os.cpu_count()} cores. One tenant per size, memories bulk-inserted over 20 "
        "repositories and 50 users (one in five in user scope, ~200-character texts), ANALYZE after the load. "
        "Exports run the worker's code in the benchmark process (`export_job_run`: claim, lease heartbeat, one "
        "REPEATABLE READ snapshot, rows streamed with `.iterator(chunk_size=2000)` into a deflated zip, SHA-256 per "
        "file, atomic rename); the time covers the whole job, from claim to the renamed archive. The queued run goes "
        "through Redis to a Celery worker on the `exports` queue (prefork, one child) and is timed from the job's "
        "creation to its `finished_at`.",
        "",
        "| memories in tenant | export of | memories exported | seconds | memories/s | archive MiB |",
        "|---|---|---|---|---|---|",
        *rows_export,
        "",
        "Session-context refresh of one stored digest (`refresh_coalesced` for user-1 / repo-1: Redis lock, render, "
        "store; debounce 0), sequential, 3 warm-up runs excluded:",
        "",
        "| memories in tenant | refreshes | p50 ms | p95 ms | max ms |",
        "|---|---|---|---|---|",
        *rows_refresh,
        "",
    ]
    write_section(args.out, report, figures)


if __name__ == "__main__":
    main()
