"""Every read of tenants and tokens goes through these functions.

They read under whatever context the caller runs in: a tenant context (RLS shows one tenant) or
``platform_context`` for operator tools.
"""

import uuid
from collections.abc import Iterable

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import OuterRef, QuerySet, Subquery

from audit.services import audit_read_record
from memory_service import rows
from memory_service.exceptions import NotFoundError
from tenants.access import Principal, require_permission, token_visibility
from tenants.context import query_with_settings
from tenants.models import ApiToken, Permission, Tenant

_TOKEN_FIELDS = rows.concrete_fields(ApiToken)
_TENANT_FIELDS = rows.concrete_fields(Tenant)


def tenant_get_by_slug(*, slug: str) -> Tenant:
    """The tenant with this slug; NotFoundError when it does not exist (or is not visible)."""
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise NotFoundError("No tenant with this slug.")
    return tenant


def tenant_get(*, tenant_id: uuid.UUID | str) -> Tenant:
    """The tenant with this id, inside its own tenant context; NotFoundError otherwise."""
    tenant = Tenant.objects.filter(id=tenant_id).first()
    if tenant is None:
        raise NotFoundError("No such tenant.")
    return tenant


def tenant_list(*, active_only: bool = False) -> QuerySet[Tenant]:
    """The tenants the caller's context shows (every tenant for a platform operator), by slug."""
    tenants = Tenant.objects.order_by("slug")
    return tenants.filter(is_active=True) if active_only else tenants


def tenant_slugs(*, ids: Iterable[uuid.UUID | str] | None = None) -> dict[uuid.UUID, str]:
    """tenant id → slug, for ``ids`` (every visible tenant when None)."""
    tenants = Tenant.objects.all() if ids is None else Tenant.objects.filter(id__in=list(ids))
    return dict(tenants.values_list("id", "slug"))


def tenant_slug_of(outer_ref: str = "tenant_id") -> Subquery:
    """A subquery of the slug of the tenant whose id is the outer query's ``outer_ref``."""
    return Subquery(Tenant.objects.filter(id=OuterRef(outer_ref)).values("slug")[:1])


def tenant_active_ids() -> list[str]:
    """Ids of every active tenant, for jobs that visit each (a function that may look past RLS)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT app_active_tenant_ids()")
        return [str(row[0]) for row in cursor.fetchall()]


def token_get(*, principal: Principal, prefix: str) -> ApiToken:
    """The token with this lookup prefix that ``principal`` may manage (``token_list``);
    NotFoundError for another tenant's or one outside a bound principal's bindings."""
    if not (prefix.isascii() and prefix.isalnum()):  # prefixes are; a NUL would not even reach the query
        raise NotFoundError("No token with this prefix in this tenant.")
    token = token_list(principal=principal).filter(prefix=prefix).first()
    if token is None:
        raise NotFoundError("No token with this prefix in this tenant.")
    return token


def token_list(*, principal: Principal) -> QuerySet[ApiToken]:
    """The tenant's tokens ``principal`` may manage, newest first: all of them for an unbound
    ``admin``, those within its own bindings for a bound one (``tenants.access.token_visibility``)."""
    require_permission(principal, Permission.ADMIN)
    # The token manager comes from an untyped library: name the type of what it returns.
    tokens: QuerySet[ApiToken] = ApiToken.objects.for_tenant(principal.tenant)
    return tokens.filter(token_visibility(principal)).order_by("-created")


def token_list_read(*, principal: Principal) -> list[ApiToken]:
    """``token_list`` for a client that is handed the list: the read is audited (the prefixes)."""
    tokens = list(token_list(principal=principal))
    audit_read_record(principal=principal, resource_type="api_token", resource_ids=[t.prefix for t in tokens],
                      details={"list": True})  # fmt: skip
    return tokens


def token_for_prefix(*, prefix: str) -> ApiToken | None:
    """The unrevoked token with this lookup prefix, or None: authentication's first read.

    One round trip sets the lookup prefix that the ``token_lookup`` policy admits the row by (the
    tenant is not known yet) and reads the row. Needs an open transaction.
    """
    _previous, found = query_with_settings(
        {"app.token_prefix": prefix},
        f"SELECT {rows.columns(_TOKEN_FIELDS, table_alias='t')} FROM tenants_apitoken t"
        " WHERE t.prefix = %s AND NOT t.revoked LIMIT 1",
        [prefix],
    )
    return rows.model_from_row(ApiToken, _TOKEN_FIELDS, found[0], alias=DEFAULT_DB_ALIAS) if found else None


def tenant_bind(*, tenant_id: uuid.UUID | str) -> Tenant | None:
    """Bind the current transaction to ``tenant_id`` for RLS and read that tenant (None if it is not
    there), in one round trip. Needs an open transaction."""
    _previous, found = query_with_settings(
        {"app.tenant_id": str(tenant_id)},
        f"SELECT {rows.columns(_TENANT_FIELDS, table_alias='t')} FROM tenants_tenant t WHERE t.id = %s",
        [tenant_id],
    )
    return rows.model_from_row(Tenant, _TENANT_FIELDS, found[0], alias=DEFAULT_DB_ALIAS) if found else None
