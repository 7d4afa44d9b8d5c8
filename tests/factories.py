"""Test data made through the same services as production (RLS applies: no bypassing role)."""

from itertools import count

from tenants.models import Tenant
from tenants.services import IssuedToken, tenant_create, token_create

_seq = count(1)


def make_tenant(slug: str | None = None) -> Tenant:
    return tenant_create(slug=slug or f"tenant-{next(_seq)}")


def make_token(tenant: Tenant, *, name: str = "agent", permissions: list[str] | None = None, **kwargs) -> IssuedToken:
    return token_create(tenant=tenant, actor="system:tests", name=name, permissions=permissions, **kwargs)
