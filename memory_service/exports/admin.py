"""Export jobs in the admin: read-only, with progress; tenant administrators see their tenant's
only (RLS, through ``MemoryAdminSite``)."""

from django.contrib import admin
from django.utils.html import format_html

from memory_service.exports.models import ExportJob, ExportStatus
from tenants.admin_site import ReadOnlyAdmin


@admin.register(ExportJob)
class ExportJobAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "tenant", "scope", "status", "progress_bar", "rows", "finished_at", "expires_at"]
    list_filter = ["status", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["tenant"]
    list_per_page = 50

    @admin.display(description="export of")
    def scope(self, job):
        return f"user {job.user}" if job.user else "whole tenant"

    @admin.display(description="progress")
    def progress_bar(self, job):
        """A bar while the job is queued, running or built; a failed job's last progress; nothing
        for an archive that retention or an erasure deleted (its status says which)."""
        if job.status in (ExportStatus.EXPIRED, ExportStatus.ERASED):
            return "—"
        if job.status == ExportStatus.FAILED:
            return f"stopped at {job.progress}%"
        return format_html('<progress max="100" value="{}"></progress> {}%', job.progress, job.progress)

    @admin.display(description="rows")
    def rows(self, job):
        return sum(job.counts.values()) if job.counts else "—"
