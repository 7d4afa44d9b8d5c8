from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.utils.translation import ngettext

from tenants.admin_site import ReadOnlyAdmin
from tenants.models import ApiToken, Tenant, User
from tenants.services import admin_actor, token_revoke


@admin.register(Tenant)
class TenantAdmin(ReadOnlyAdmin):
    list_display = ["slug", "name", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["slug", "name"]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "prefix",
        "tenant",
        "user",
        "permissions",
        "created",
        "last_used_at",
        "expiry_date",
        "revoked",
    ]
    list_filter = ["revoked", "tenant"]
    search_fields = ["name", "prefix", "user"]
    exclude = ["hashed_key", "id"]
    actions = ["revoke_tokens"]

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request, queryset):
        tokens = list(queryset)
        for token in tokens:
            token_revoke(tenant=token.tenant, actor=admin_actor(request.user), token=token)
        revoked = ngettext("Revoked %(count)d token.", "Revoked %(count)d tokens.", len(tokens))
        self.message_user(request, revoked % {"count": len(tokens)}, messages.SUCCESS)

    def has_change_permission(self, request, obj=None):
        # Needed for the revoke action; every field stays read-only.
        return self.admin_site.has_permission(request)

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields if f.name not in self.exclude]


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    """Admin users; only platform operators see or manage them.

    The user table has no row-level security (logins read it before any tenant is known), so a
    tenant administrator must never reach these pages, whatever model permissions they were given.
    """

    fieldsets = DjangoUserAdmin.fieldsets + (("Tenant", {"fields": ("tenant",)}),)
    list_display = ["username", "is_staff", "is_superuser", "tenant"]
    list_filter = ["is_staff", "is_superuser", "tenant"]

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser
