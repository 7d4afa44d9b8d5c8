"""A worker killed in the middle of an export: the job is claimed again and exactly one good
archive comes out. This module runs its own workers (none from the shared fixture)."""

import os
import signal
import time

import pytest
from django.utils import timezone

from memory_service.exports.archive import verify_archive
from memory_service.exports.models import ExportStatus, archive_dir
from memory_service.exports.services import export_jobs_requeue_stale
from memory_service.memories.models import Memory
from tenants.context import tenant_context
from tests.conftest import client_for, purge_queues, start_worker_process
from tests.exports.helpers import job_row, wait_for_status
from tests.factories import make_memories, make_tenant, make_token

WORKER_ENV = {"EXPORT_LEASE_SECONDS": "2", "EXPORT_CHUNK_SIZE": "250"}


def _kill(process) -> None:
    os.killpg(process.pid, signal.SIGKILL)  # the worker and its pool children
    process.wait(timeout=30)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_yields_one_good_archive_after_a_worker_is_killed_mid_export():
    purge_queues()
    tenant = make_tenant("killed")
    make_memories(tenant, 30_000, pad=60)
    client = client_for(make_token(tenant, permissions=["export"]).raw)
    first = start_worker_process(name="doomed", extra_env=WORKER_ENV, concurrency=1)
    try:
        response = client.post("/api/v1/exports", {}, format="json")
        job_id = response.json()["id"]
        directory = archive_dir(tenant.id)
        deadline = time.monotonic() + 120
        while not list(directory.glob(f".{job_id}.*.part")):
            assert time.monotonic() < deadline, "the export never started writing"
            time.sleep(0.02)
        time.sleep(0.3)  # well into the archive
    finally:
        _kill(first)
    killed = job_row(tenant, job_id)
    assert killed.status == ExportStatus.RUNNING and killed.attempts == 1
    assert not (directory / f"{job_id}.zip").exists()

    second = start_worker_process(name="rescuer", extra_env=WORKER_ENV, concurrency=1)
    try:
        while job_row(tenant, job_id).lease_expires_at > timezone.now():
            time.sleep(0.2)  # the dead worker's lease runs out
        assert export_jobs_requeue_stale(tenant=tenant) == 1  # what beat's sweep does
        job = wait_for_status(tenant, job_id)
    finally:
        _kill(second)
    assert job.status == ExportStatus.SUCCEEDED and job.attempts == 2
    assert sorted(p.name for p in directory.iterdir()) == [f"{job_id}.zip"]
    manifest = verify_archive(directory / f"{job_id}.zip")
    with tenant_context(tenant.id):
        total = Memory.objects.for_tenant(tenant).count()
    assert {f["name"]: f["count"] for f in manifest["files"]}["memories.jsonl"] == total == 30_000
