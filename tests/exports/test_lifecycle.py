"""Job transitions outside a normal build: failure, a lost message, a worker that keeps dying."""

import pytest
from django.conf import settings
from django.utils import timezone

from audit.models import AuditEvent
from memory_service.exports.models import ExportJob, ExportStatus
from memory_service.exports.services import (
    export_job_claim,
    export_job_fail,
    export_job_start,
    export_jobs_requeue_stale,
)
from tenants.context import tenant_context
from tests.exports.helpers import job_row

pytestmark = pytest.mark.django_db


def _set(tenant, job, **values) -> None:
    with tenant_context(tenant.id):
        ExportJob.objects.filter(id=job.id).update(**values)


def test_it_records_a_failure_once_with_the_error_class_only(tenant, api_client):
    job = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    assert export_job_claim(tenant_id=tenant.id, job_id=job.id) == 1
    assert export_job_fail(tenant_id=tenant.id, job_id=job.id, error="SoftTimeLimitExceeded")
    assert not export_job_fail(tenant_id=tenant.id, job_id=job.id, error="Again")  # already finished
    failed = job_row(tenant, job.id)
    assert failed.status == ExportStatus.FAILED and failed.error == "SoftTimeLimitExceeded" and failed.finished_at
    assert api_client.get(f"/api/v1/exports/{job.id}").json()["status"] == "failed"
    assert api_client.get(f"/api/v1/exports/{job.id}/download").status_code == 409
    with tenant_context(tenant.id):
        events = list(AuditEvent.objects.for_tenant(tenant).filter(action="export_finished"))
    assert len(events) == 1
    assert events[0].details == {"status": "failed", "error": "SoftTimeLimitExceeded", "attempts": 1}


def test_it_claims_a_job_once_and_again_only_after_its_lease_ran_out(tenant):
    job = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    assert export_job_claim(tenant_id=tenant.id, job_id=job.id) == 1
    assert export_job_claim(tenant_id=tenant.id, job_id=job.id) is None  # a live lease
    _set(tenant, job, lease_expires_at=timezone.now() - timezone.timedelta(seconds=1))
    assert export_job_claim(tenant_id=tenant.id, job_id=job.id) == 2
    _set(tenant, job, status=ExportStatus.SUCCEEDED)
    assert export_job_claim(tenant_id=tenant.id, job_id=job.id) is None


def test_it_queues_again_a_dead_workers_job_and_a_lost_message_but_not_too_often(tenant):
    dead = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    export_job_claim(tenant_id=tenant.id, job_id=dead.id)
    _set(tenant, dead, lease_expires_at=timezone.now() - timezone.timedelta(seconds=1))
    lost = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    _set(tenant, lost, created_at=timezone.now() - timezone.timedelta(hours=1))
    fresh = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    assert export_jobs_requeue_stale(tenant=tenant) == 2
    assert job_row(tenant, dead.id).status == ExportStatus.QUEUED and job_row(tenant, dead.id).attempts == 1
    assert job_row(tenant, fresh.id).status == ExportStatus.QUEUED
    assert export_jobs_requeue_stale(tenant=tenant) == 0  # queued again a moment ago


def test_it_fails_a_job_whose_workers_keep_dying(tenant):
    job = export_job_start(tenant=tenant, actor="system:tests", enqueue=False)
    _set(tenant, job, status=ExportStatus.RUNNING, attempts=settings.EXPORT_MAX_ATTEMPTS,
         lease_expires_at=timezone.now() - timezone.timedelta(seconds=1))  # fmt: skip
    assert export_job_claim(tenant_id=tenant.id, job_id=job.id) is None
    assert export_jobs_requeue_stale(tenant=tenant) == 0
    failed = job_row(tenant, job.id)
    assert failed.status == ExportStatus.FAILED and failed.error == "AttemptsExhausted"
