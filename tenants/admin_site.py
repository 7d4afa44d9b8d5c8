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


class ReadOnlyAdmin(TenantScopedAdmin):
    """Admin pages that never add, change or delete rows (for superusers too)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MemoryAdminConfig(AdminConfig):
    default_site = "tenants.admin_site.MemoryAdminSite"
