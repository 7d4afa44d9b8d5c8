"""Audit inspection in the admin: read-only for everyone, scoped to the tenant by RLS.

Opening the list or an event is itself recorded (``retrieve`` of ``audit_event``), and so is a
CSV export (``audit_exported``), in the chain of each tenant whose events were shown.
"""

import csv
import io
import re

from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from audit.checkpoints import checkpoint_store
from audit.models import Action, AuditEvent
from audit.selectors import audit_tenant_ids
from audit.services import audit_event_record
from audit.verify import verify_tenant_audit
from tenants.admin_site import ReadOnlyAdmin
from tenants.selectors import tenant_list, tenant_slug_of, tenant_slugs
from tenants.services import admin_actor


class TenantFilter(admin.SimpleListFilter):
    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request, model_admin):
        return [(str(t.id), t.slug) for t in tenant_list()]

    def queryset(self, request, queryset):
        return queryset.filter(tenant_id=self.value()) if self.value() else queryset


class TimeFilter(admin.DateFieldListFilter):
    """The date filter of ``at``, titled "time" (not "at")."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = "time"


class ActorFilter(admin.SimpleListFilter):
    title = "actor"
    parameter_name = "actor_kind"

    def lookups(self, request, model_admin):
        return [("token:", "API tokens"), ("admin:", "admin users"), ("system:", "system jobs")]

    def queryset(self, request, queryset):
        return queryset.filter(actor__startswith=self.value()) if self.value() else queryset


UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def short_id(value: str):
    """An id of more than 12 characters (a UUID) cut to its first 8, the whole id in the tooltip."""
    if len(value) <= 12:
        return value
    return format_html('<span class="short-id" title="{}">{}…</span>', value, value[:8])


def short_ids_in(text: str):
    """``text`` with each UUID in it shortened as ``short_id`` does (``system:export:<job id>``)."""
    parts = UUID_RE.split(text)
    ids = [short_id(value) for value in UUID_RE.findall(text)] + [""]
    return format_html_join("", "{}{}", zip(parts, ids, strict=True))


def _admin_actor(request) -> str:
    return admin_actor(request.user)


def _record(request, *, action: Action, tenant_ids, resource_type: str, details: dict, resource_ids=()) -> None:
    tenants = {t.id: t for t in tenant_list().filter(id__in=set(tenant_ids))}
    for tenant in tenants.values():
        audit_event_record(
            tenant=tenant, actor=_admin_actor(request), action=action, resource_type=resource_type,
            resource_ids=resource_ids, details=details,
        )  # fmt: skip


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["seq", "at", "tenant_slug", "actor_shown", "action", "resource_type", "resources"]
    list_filter = ["action", TenantFilter, ActorFilter, ("at", TimeFilter)]
    search_fields = ["actor"]
    search_help_text = "An actor, or the exact id of a resource (memory, token, proposal…)."
    date_hierarchy = "at"
    list_per_page = 50
    ordering = ["-at", "-id"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(tenant_slug=tenant_slug_of("tenant_id"))

    class Media:
        css = {"all": ["audit/admin.css"]}

    @admin.display(description="tenant")
    def tenant_slug(self, event):
        return event.tenant_slug or short_id(str(event.tenant_id))

    @admin.display(description="actor", ordering="actor")
    def actor_shown(self, event):
        return short_ids_in(event.actor)

    @admin.display(description="resources")
    def resources(self, event):
        """The first three resource ids, shortened, each whole in its tooltip (and on the event's page)."""
        ids = event.resource_ids
        shown = format_html_join(", ", "{}", ((short_id(value),) for value in ids[:3]))
        return format_html("{}{}", shown, f" (+{len(ids) - 3})" if len(ids) > 3 else "")

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(actor__icontains=term) | Q(resource_ids__contains=[term])), False

    def get_urls(self):
        return [
            path("export/", self.admin_site.admin_view(self.export_view), name="audit_auditevent_export"),
            path("verify/", self.admin_site.admin_view(self.verify_view), name="audit_auditevent_verify"),
        ] + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        page = getattr(response, "context_data", {}).get("cl")
        if page is not None:
            shown = list(page.result_list)
            _record(request, action=Action.RETRIEVE, tenant_ids=self._viewer_tenants(request, shown),
                    resource_type="audit_event", details={"view": "list", "count": len(shown)})  # fmt: skip
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        event = self.get_object(request, object_id)
        if event is not None:
            _record(request, action=Action.RETRIEVE, tenant_ids=[event.tenant_id], resource_type="audit_event",
                    resource_ids=[str(event.id)], details={"view": "detail"})  # fmt: skip
        return super().change_view(request, object_id, form_url, extra_context)

    def _viewer_tenants(self, request, events) -> set:
        if request.user.tenant_id is not None:
            return {request.user.tenant_id}
        return {event.tenant_id for event in events}

    def export_view(self, request):
        """CSV of the filtered list as shown (all pages); the export is audited per tenant."""
        changelist = self.get_changelist_instance(request)
        events = list(changelist.get_queryset(request))
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(
            ["id", "tenant", "seq", "at", "actor", "action", "resource_type", "resource_ids", "details", "hash"]
        )
        for e in events:
            writer.writerow([e.id, e.tenant_slug or e.tenant_id, e.seq, e.at.isoformat(), e.actor,
                             e.action, e.resource_type, " ".join(e.resource_ids), e.details, e.hash])  # fmt: skip
        _record(request, action=Action.AUDIT_EXPORTED, tenant_ids=self._viewer_tenants(request, events),
                resource_type="audit_event", details={"rows": len(events), "format": "csv"})  # fmt: skip
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="audit-{timezone.now():%Y%m%d-%H%M%S}.csv"'
        return response

    def verify_view(self, request):
        """Verify the chain of every tenant the user may see against its latest checkpoint (as
        ``verify_audit`` does, without writing checkpoints) and report it on the list page."""
        store = checkpoint_store()
        if request.user.tenant_id:
            tenant_ids = {str(request.user.tenant_id)}
        else:  # a tenant whose whole chain was deleted is known only to the checkpoint store
            tenant_ids = {str(tenant_id) for tenant_id in audit_tenant_ids()} | set(store.tenant_ids())
        slugs = {str(k): v for k, v in tenant_slugs().items()}
        for tenant_id in sorted(tenant_ids):
            report = verify_tenant_audit(tenant_id, store=store)
            level = messages.SUCCESS if report.ok else messages.ERROR
            self.message_user(request, f"{slugs.get(tenant_id, tenant_id)}: {report.describe()}.", level)
        return HttpResponseRedirect("../")
