"""Every read of export jobs; each starts from ``for_tenant``."""

import uuid

from django.db.models import QuerySet

from audit.services import audit_read_record
from memory_service.exceptions import NotFoundError
from memory_service.exports.models import ExportJob
from tenants.access import Principal, check_export_job, export_job_visibility
from tenants.models import Tenant


def export_job_get(*, principal: Principal, job_id: uuid.UUID | str) -> ExportJob:
    """The job if the token may see it; NotFoundError if malformed, missing, another tenant's or
    another user's (for a user-bound token); 403 for a token bound to repositories."""
    try:
        job_id = uuid.UUID(str(job_id))
    except ValueError as exc:
        raise NotFoundError("No such export.") from exc
    job = ExportJob.objects.for_tenant(principal.tenant).filter(export_job_visibility(principal), id=job_id).first()
    if job is None:
        raise NotFoundError("No such export.")
    check_export_job(principal, job)
    return job


def export_job_read(*, principal: Principal, job_id: uuid.UUID | str) -> ExportJob:
    """``export_job_get`` for a client watching the job: the read is audited."""
    job = export_job_get(principal=principal, job_id=job_id)
    audit_read_record(principal=principal, resource_type="export", resource_ids=[job.id])
    return job


def export_job_get_for_worker(*, tenant_id: uuid.UUID | str, job_id: uuid.UUID | str) -> ExportJob:
    """The job with its tenant, for code already inside the tenant's context (workers, commands)."""
    return ExportJob.objects.for_tenant(tenant_id).select_related("tenant").get(id=job_id)


def export_jobs_of(*, tenant: Tenant) -> QuerySet[ExportJob]:
    """The tenant's jobs, newest first."""
    return ExportJob.objects.for_tenant(tenant).order_by("-created_at")
