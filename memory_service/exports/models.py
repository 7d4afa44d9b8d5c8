import uuid
from pathlib import Path

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from tenants.models import Tenant, TenantQuerySet


class ExportStatus(models.TextChoices):
    """``queued`` → ``running`` → ``succeeded`` or ``failed``; a built archive later becomes
    ``expired`` (retention deleted it) or ``erased`` (an erasure removed it: it held the user's data)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    ERASED = "erased"


class ExportJob(models.Model):
    """A compliance export of a tenant, or of one user's data, built by a worker into a zip.

    A worker claims the job by a conditional update that bumps ``attempts`` and sets a lease
    (``lease_expires_at``) that it renews while it works; a job whose lease ran out (its worker
    died) may be claimed again, and only the holder of the latest attempt may finish it.
    ``user`` is empty for a whole-tenant export.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    user = models.CharField(max_length=128, blank=True, default="")
    requested_by = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=ExportStatus.choices, default=ExportStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True, help_text="Rows per file of the archive")
    size_bytes = models.BigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="", help_text="Checksum of the whole archive")
    error = models.CharField(max_length=64, blank=True, default="", help_text="Error class only, never a message")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(progress__lte=100), name="export_job_progress_range"),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="export_job_tenant_created"),
            models.Index(fields=["tenant", "status"], name="export_job_tenant_status"),
        ]

    def __str__(self) -> str:
        return f"export {self.id} ({self.status})"

    @property
    def archive_path(self) -> Path:
        """Where the finished archive lives: ``STORAGE_DIR/exports/<tenant_id>/<job_id>.zip``."""
        return archive_dir(self.tenant_id) / f"{self.id}.zip"


def archive_dir(tenant_id) -> Path:
    return Path(settings.STORAGE_DIR) / "exports" / str(tenant_id)
