"""The admin site, and the one mechanism that scopes every admin page to a tenant.

``MemoryAdminSite.admin_view`` wraps every admin view: a tenant administrator's request runs in
``tenant_context`` (RLS shows only their tenant, in lists, filters, dropdowns and forms alike);
a superuser's runs in ``platform_context`` (the role that may bypass RLS). The response is
rendered inside that context, because template rendering evaluates lazy querysets.
"""

from contextlib import nullcontext
from functools import wraps

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.utils.text import capfirst

from tenants.context import platform_context, tenant_context


def admin_scope(user):
    """The context an admin user's requests run in."""
    if user.is_active and user.is_superuser:
        return platform_context()
    if user.is_active and user.is_staff and user.tenant_id is not None:
        return tenant_context(user.tenant_id)
    return nullcontext()


class MemoryAdminSite(admin.AdminSite):
    site_header = "memory-service administration"
    site_title = "memory-service"
    index_title = "Tenants, memories, proposals and audit"
    # The service has no public site to link to: no "View site" link.
    site_url = None
    # Lists of many columns need the page's width; the index lists every page.
    enable_nav_sidebar = False

    def has_permission(self, request):
        """Superusers, and staff users bound to a tenant."""
        user = request.user
        return user.is_active and (user.is_superuser or (user.is_staff and user.tenant_id is not None))

    def admin_view(self, view, cacheable=False):
        inner = super().admin_view(view, cacheable)

        @wraps(inner)
        def scoped(request, *args, **kwargs):
            with admin_scope(request.user):
                response = inner(request, *args, **kwargs)
                if hasattr(response, "render") and callable(response.render):
                    response.render()
            return response

        return scoped


class TenantScopedAdmin(admin.ModelAdmin):
    """Base for admin pages of tenant data: visible to superusers and tenant administrators.

    Scoping is done by RLS through ``MemoryAdminSite.admin_view``, never by per-page filters.
    """

    def has_module_permission(self, request):
        return self.admin_site.has_permission(request)

    def has_view_permission(self, request, obj=None):
        return self.admin_site.has_permission(request)

    def changelist_view(self, request, extra_context=None):
        """Titled by what it lists ("Audit events"), not "Select audit event to view"."""
        title = capfirst(self.model._meta.verbose_name_plural)
        return super().changelist_view(request, {"title": title, **(extra_context or {})})


class ReadOnlyAdmin(TenantScopedAdmin):
    """Admin pages that never add, change or delete rows (for superusers too)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def admin_read_record(request, *, resource_type: str, objects: list, view: str) -> None:
    """Record that the person behind ``request`` was shown ``objects`` (rows with ``tenant_id``):
    one ``retrieve`` event in each tenant they belong to, with their ids, never their content."""
    # Imported here: this module is loaded with the admin app, before the models are ready.
    from audit.models import Action
    from audit.services import audit_event_record
    from tenants.selectors import tenant_list
    from tenants.services import admin_actor

    by_tenant: dict = {}
    for obj in objects:
        by_tenant.setdefault(obj.tenant_id, []).append(str(obj.pk))
    for tenant in tenant_list().filter(id__in=list(by_tenant)):
        ids = by_tenant[tenant.id]
        audit_event_record(
            tenant=tenant, actor=admin_actor(request.user), action=Action.RETRIEVE, resource_type=resource_type,
            resource_ids=ids, details={"count": len(ids), "view": view},
        )  # fmt: skip


class DefaultChoiceFilter(admin.SimpleListFilter):
    """A list filter whose ``default`` choice is selected when none is asked for (a queue shows what
    needs a person first); it offers no "All" of its own: list one among the lookups if wanted."""

    default = ""

    def choices(self, changelist):
        current = self.value() or self.default
        for value, label in self.lookup_choices:
            yield {
                "selected": current == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }


class ReadAuditedAdmin(ReadOnlyAdmin):
    """Read-only pages whose list and detail views are audited as reads (``admin_read_record``)."""

    audit_resource_type = ""

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            shown = list(changelist.result_list)
            admin_read_record(request, resource_type=self.audit_resource_type, objects=shown, view="list")
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        shown = self.get_object(request, object_id)
        if shown is not None:
            admin_read_record(request, resource_type=self.audit_resource_type, objects=[shown], view="detail")
        return super().change_view(request, object_id, form_url, extra_context)


class MemoryAdminConfig(AdminConfig):
    default_site = "tenants.admin_site.MemoryAdminSite"
