"""Every write to export jobs and archives: start, claim, build, finish, fail, expire, erase.

A job is built by whoever claims it — a worker of the ``exports`` queue, or ``export_tenant`` on
the command line. The claim is a conditional update that continues only if exactly one row
changed: it takes a ``queued`` job, or a ``running`` one whose lease ran out (its worker died),
and bumps ``attempts``. While building, a heartbeat thread renews the lease and records progress
on the row; only the holder of the latest attempt may finish. The archive is written to a temp
file in the target directory and renamed into place in the transaction that marks the job
``succeeded``, so a restart never leaves two archives nor a half one. Temp files of earlier
attempts are removed by the next claim.
"""

import hashlib
import logging
import os
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from audit.models import Action
from audit.services import audit_event_record, user_pseudonym
from memory_service.exceptions import ConflictError, GoneError
from memory_service.exports.archive import section_totals, write_archive
from memory_service.exports.models import ExportJob, ExportStatus, archive_dir
from memory_service.exports.selectors import export_job_get_for_worker
from tenants.access import Principal, check_export_job, export_user_for, require_permission
from tenants.context import tenant_context
from tenants.models import Permission, Tenant
from tenants.services import actor_of

logger = logging.getLogger(__name__)

# Archives whose job is no longer ``succeeded`` are deleted by the retention sweep once this old
# (younger ones may belong to a job finishing right now).
ORPHAN_MIN_AGE_SECONDS = 3600
REQUEUE_INTERVAL = timedelta(minutes=10)


def _enqueue(job: ExportJob) -> None:
    """After commit, queue the build (ids only). If the broker is down, the stale sweep queues it."""
    from memory_service.exports.tasks import export_build_task

    tenant_id, job_id = str(job.tenant_id), str(job.id)

    def publish() -> None:
        try:
            export_build_task.apply_async(args=[tenant_id, job_id], retry=False)
        except Exception as exc:  # any broker failure: the job stays queued for the sweep
            logger.warning("export not queued; the sweep will queue it", extra={"error": type(exc).__name__})

    transaction.on_commit(publish)


def export_job_request(*, principal: Principal, user: str = "") -> ExportJob:
    """Start an export on a client's request: of ``user`` ('' = the whole tenant), as far as the
    principal's permission and bindings allow (``tenants.access.export_user_for``)."""
    require_permission(principal, Permission.EXPORT)
    return export_job_start(tenant=principal.tenant, actor=principal.actor, user=export_user_for(principal, user))


def export_job_start(*, tenant: Tenant, actor: str, user: str = "", enqueue: bool = True) -> ExportJob:
    """Create a queued export of ``tenant`` (of ``user``'s data if given), audited, and queue it."""
    with tenant_context(tenant.id):
        job = ExportJob.objects.create(tenant=tenant, user=user, requested_by=actor)
        audit_event_record(
            tenant=tenant, actor=actor, action=Action.EXPORT_STARTED, resource_type="export", resource_ids=[job.id],
            details={"user": user_pseudonym(user) or None},
        )  # fmt: skip
        if enqueue:
            _enqueue(job)
    return job


def export_job_claim(*, tenant_id: uuid.UUID | str, job_id: uuid.UUID | str) -> int | None:
    """Claim the job for one attempt; returns the attempt number, or None if it is not claimable
    (finished, running under a live lease, or out of attempts)."""
    now = timezone.now()
    lease = timedelta(seconds=settings.EXPORT_LEASE_SECONDS)
    with tenant_context(tenant_id):
        claimable = Q(status=ExportStatus.QUEUED) | Q(status=ExportStatus.RUNNING, lease_expires_at__lt=now)
        updated = (
            ExportJob.objects.for_tenant(tenant_id)
            .filter(claimable, id=job_id, attempts__lt=settings.EXPORT_MAX_ATTEMPTS)
            .update(
                status=ExportStatus.RUNNING, attempts=F("attempts") + 1, lease_expires_at=now + lease,
                started_at=now, progress=0,
            )
        )  # fmt: skip
        if updated != 1:
            return None
        return ExportJob.objects.for_tenant(tenant_id).values_list("attempts", flat=True).get(id=job_id)


class LeaseLost(Exception):
    """Another attempt took the job over (or an erasure cancelled it): stop without finishing."""


class _Heartbeat(threading.Thread):
    """Renews the lease and records progress on the job row, from its own database connection
    (the builder's transaction stays open for the whole archive, so its writes would not show)."""

    def __init__(
        self,
        *,
        tenant_id: uuid.UUID | str,
        job_id: uuid.UUID | str,
        attempt: int,
        on_progress: Callable[[int, int], None] | None,
    ):
        super().__init__(daemon=True, name=f"export-heartbeat-{job_id}")
        self.tenant_id, self.job_id, self.attempt = str(tenant_id), job_id, attempt
        self.total = 0
        self.done = 0
        self.lost = False
        self._stopped = threading.Event()
        self._on_progress = on_progress
        # Progress shows every couple of seconds; the lease is renewed well before it runs out.
        self.interval = max(0.2, min(2.0, settings.EXPORT_LEASE_SECONDS / 3))

    def add(self, rows: int) -> None:
        self.done += rows
        if self._on_progress:
            self._on_progress(self.done, self.total)
        if self.lost:
            raise LeaseLost

    def progress(self) -> int:
        return min(99, self.done * 100 // self.total) if self.total else 0

    def run(self) -> None:
        try:
            while not self._stopped.wait(self.interval):
                if not self._renew():
                    self.lost = True
                    return
        finally:
            connections.close_all()

    def _renew(self) -> bool:
        lease = timezone.now() + timedelta(seconds=settings.EXPORT_LEASE_SECONDS)
        with tenant_context(self.tenant_id):
            updated = (
                ExportJob.objects.for_tenant(self.tenant_id)
                .filter(id=self.job_id, status=ExportStatus.RUNNING, attempts=self.attempt)
                .update(progress=self.progress(), lease_expires_at=lease)
            )
        return updated == 1

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def _partial_path(directory: Path, job_id: uuid.UUID | str, attempt: int) -> Path:
    return directory / f".{job_id}.{attempt}.part"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_job_run(
    *, tenant_id: uuid.UUID | str, job_id: uuid.UUID | str, on_progress: Callable[[int, int], None] | None = None
) -> ExportJob | None:
    """Claim and build the job; the finished job, or None when it was not ours to build.

    Idempotent: a job already finished, or running under another live attempt, is left alone.
    Reads run in one REPEATABLE READ transaction, so every file of the archive agrees. Call it
    outside any transaction: the claim must be committed for the heartbeat's connection to see it.
    """
    attempt = export_job_claim(tenant_id=tenant_id, job_id=job_id)
    if attempt is None:
        return None
    with tenant_context(tenant_id):
        job = export_job_get_for_worker(tenant_id=tenant_id, job_id=job_id)
    directory = archive_dir(tenant_id)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(f".{job_id}.*.part"):
        stale.unlink(missing_ok=True)  # earlier attempts, killed mid-write
    partial = _partial_path(directory, job_id, attempt)
    heartbeat = _Heartbeat(tenant_id=tenant_id, job_id=job_id, attempt=attempt, on_progress=on_progress)
    heartbeat.start()
    outermost = not connection.in_atomic_block
    try:
        with transaction.atomic():
            if outermost:  # must be the transaction's first statement
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            with tenant_context(tenant_id):
                heartbeat.total = section_totals(tenant=job.tenant, user=job.user)
                with open(partial, "wb") as fileobj:
                    result = write_archive(
                        fileobj=fileobj, tenant=job.tenant, user=job.user, job_id=str(job.id),
                        chunk_size=settings.EXPORT_CHUNK_SIZE, on_rows=heartbeat.add,
                    )  # fmt: skip
                    fileobj.flush()
                    os.fsync(fileobj.fileno())
    except LeaseLost:
        partial.unlink(missing_ok=True)
        return None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        heartbeat.stop()
    return _finish(job=job, attempt=attempt, partial=partial, counts=result.counts)


def _finish(*, job: ExportJob, attempt: int, partial: Path, counts: dict) -> ExportJob | None:
    """Mark the attempt succeeded and rename its archive into place, in one transaction."""
    size, checksum = partial.stat().st_size, _sha256(partial)
    now = timezone.now()
    with tenant_context(job.tenant_id):
        updated = (
            ExportJob.objects.for_tenant(job.tenant_id)
            .filter(id=job.id, status=ExportStatus.RUNNING, attempts=attempt)
            .update(
                status=ExportStatus.SUCCEEDED, progress=100, counts=counts, size_bytes=size, sha256=checksum,
                finished_at=now, expires_at=now + job.tenant.export_retention, lease_expires_at=None,
            )
        )  # fmt: skip
        if updated != 1:
            partial.unlink(missing_ok=True)
            return None
        os.replace(partial, job.archive_path)
        _fsync_dir(job.archive_path.parent)
        audit_event_record(
            tenant=job.tenant, actor=f"system:export:{job.id}", action=Action.EXPORT_FINISHED,
            resource_type="export", resource_ids=[job.id],
            details={"status": ExportStatus.SUCCEEDED.value, "counts": counts, "bytes": size, "attempts": attempt},
        )  # fmt: skip
        job.refresh_from_db()
    return job


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def export_job_fail(*, tenant_id: uuid.UUID | str, job_id: uuid.UUID | str, error: str) -> bool:
    """Mark an unfinished job failed (``error`` is an error class name, never a message)."""
    with tenant_context(tenant_id):
        jobs = ExportJob.objects.for_tenant(tenant_id).filter(
            id=job_id, status__in=[ExportStatus.QUEUED, ExportStatus.RUNNING]
        )
        job = jobs.select_related("tenant").first()
        if job is None:
            return False
        jobs.update(status=ExportStatus.FAILED, error=error[:64], finished_at=timezone.now(), lease_expires_at=None)
        audit_event_record(
            tenant=job.tenant, actor=f"system:export:{job.id}", action=Action.EXPORT_FINISHED,
            resource_type="export", resource_ids=[job.id],
            details={"status": ExportStatus.FAILED.value, "error": error[:64], "attempts": job.attempts},
        )  # fmt: skip
    for partial in archive_dir(tenant_id).glob(f".{job_id}.*.part"):
        partial.unlink(missing_ok=True)
    return True


def export_jobs_requeue_stale(*, tenant: Tenant) -> int:
    """Queue again the jobs whose worker died (lease run out: back to ``queued``) or whose message
    was lost (queued for longer than two leases); fail those out of attempts. Returns how many
    were queued. A job queued again is not queued anew for ``REQUEUE_INTERVAL`` (its message may
    just be waiting behind a long export), so duplicates stay few; a duplicate is a no-op anyway."""
    now = timezone.now()
    lease = timedelta(seconds=settings.EXPORT_LEASE_SECONDS)
    queued = 0
    with tenant_context(tenant.id):
        jobs = ExportJob.objects.for_tenant(tenant)
        stale = jobs.filter(
            Q(status=ExportStatus.RUNNING, lease_expires_at__lt=now)
            | (
                Q(status=ExportStatus.QUEUED, created_at__lt=now - 2 * lease)
                & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
            )
        )
        for job in stale.select_for_update(skip_locked=True):
            if job.status == ExportStatus.RUNNING and job.attempts >= settings.EXPORT_MAX_ATTEMPTS:
                export_job_fail(tenant_id=tenant.id, job_id=job.id, error="AttemptsExhausted")
                continue
            # For a queued job, ``lease_expires_at`` is when the sweep may queue it again.
            jobs.filter(id=job.id).update(status=ExportStatus.QUEUED, lease_expires_at=now + REQUEUE_INTERVAL)
            _enqueue(job)
            queued += 1
    return queued


def export_job_download(*, principal: Principal, job: ExportJob) -> Path:
    """The path of a finished archive the token may download, audited (``export_downloaded``).

    410 once it expired or was erased; 409 while it is not built yet (or failed).
    """
    check_export_job(principal, job)
    if job.status in (ExportStatus.EXPIRED, ExportStatus.ERASED):
        raise GoneError("This export archive was deleted.")
    if job.status != ExportStatus.SUCCEEDED:
        raise ConflictError("This export has no archive yet.", fields={"status": [job.status]})
    path = job.archive_path
    if not path.is_file():
        raise GoneError("This export archive was deleted.")
    audit_event_record(
        tenant=principal.tenant, actor=actor_of(principal), action=Action.EXPORT_DOWNLOADED, resource_type="export",
        resource_ids=[job.id], details={"bytes": job.size_bytes},
    )  # fmt: skip
    return path


def _delete_files_on_commit(paths: list[Path]) -> None:
    def delete() -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    if paths:
        transaction.on_commit(delete)


def export_archives_expire(*, tenant: Tenant) -> int:
    """Delete the archives past their expiry (job → ``expired``); returns how many.

    Also deletes old files no ``succeeded`` job owns (left by a crash between commit and unlink).
    """
    now = timezone.now()
    with tenant_context(tenant.id):
        jobs = ExportJob.objects.for_tenant(tenant).filter(status=ExportStatus.SUCCEEDED, expires_at__lte=now)
        expired = list(jobs.select_for_update())
        jobs.filter(id__in=[j.id for j in expired]).update(status=ExportStatus.EXPIRED)
        _delete_files_on_commit([job.archive_path for job in expired])
        live = {
            str(i)
            for i in ExportJob.objects.for_tenant(tenant)
            .filter(status__in=[ExportStatus.SUCCEEDED, ExportStatus.RUNNING])
            .values_list("id", flat=True)
        }
        directory = archive_dir(tenant.id)
        orphans = []
        if directory.is_dir():
            for path in directory.iterdir():
                job_id = path.name.removeprefix(".").split(".")[0]
                if job_id not in live and now.timestamp() - path.stat().st_mtime > ORPHAN_MIN_AGE_SECONDS:
                    orphans.append(path)
        _delete_files_on_commit(orphans)
    return len(expired)


def export_archives_erase(*, tenant: Tenant, user: str) -> int:
    """Remove every archive that may hold ``user``'s data: the user's own exports, and the whole-tenant
    exports built or being built until now. Jobs become ``erased`` (a running one stops: its lease
    is gone); a user's jobs keep only the user's pseudonym. Returns how many archives were deleted."""
    with tenant_context(tenant.id):
        jobs = ExportJob.objects.for_tenant(tenant).filter(
            Q(user=user, status__in=[ExportStatus.QUEUED, ExportStatus.RUNNING, ExportStatus.SUCCEEDED])
            | Q(user="", status__in=[ExportStatus.RUNNING, ExportStatus.SUCCEEDED])
        )
        affected = list(jobs.select_for_update())
        ids = [job.id for job in affected]
        ExportJob.objects.for_tenant(tenant).filter(id__in=ids).update(status=ExportStatus.ERASED, progress=0)
        ExportJob.objects.for_tenant(tenant).filter(user=user).update(user=user_pseudonym(user))
        _delete_files_on_commit([job.archive_path for job in affected])
        for job in affected:
            if job.status == ExportStatus.RUNNING:
                _delete_files_on_commit(list(archive_dir(tenant.id).glob(f".{job.id}.*.part")))
    return sum(1 for job in affected if job.status == ExportStatus.SUCCEEDED)
