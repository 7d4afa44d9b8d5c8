"""Every read of export jobs; each starts from ``for_tenant``."""

import uuid

from django.db.models import QuerySet

from memory_service.exceptions import NotFoundError
from memory_service.exports.models import ExportJob
from tenants.models import ApiToken, Tenant


def export_job_visible(*, token: ApiToken) -> QuerySet[ExportJob]:
    """The jobs a token may see: its tenant's, and only its own user's when it is bound to one."""
    jobs = ExportJob.objects.for_tenant(token.tenant)
    if token.user:
        jobs = jobs.filter(user=token.user)
    return jobs


def export_job_get(*, token: ApiToken, job_id: uuid.UUID | str) -> ExportJob:
    """The job if the token may see it; NotFoundError if malformed, missing or another tenant's."""
    try:
        job_id = uuid.UUID(str(job_id))
    except ValueError as exc:
        raise NotFoundError("No such export.") from exc
    job = export_job_visible(token=token).filter(id=job_id).first()
    if job is None:
        raise NotFoundError("No such export.")
    return job


def export_job_get_for_worker(*, tenant_id, job_id) -> ExportJob:
    """The job with its tenant, for code already inside the tenant's context (workers, commands)."""
    return ExportJob.objects.for_tenant(tenant_id).select_related("tenant").get(id=job_id)


def export_jobs_of(*, tenant: Tenant) -> QuerySet[ExportJob]:
    """The tenant's jobs, newest first."""
    return ExportJob.objects.for_tenant(tenant).order_by("-created_at")
