"""The activity log in the admin: read-only, each tenant administrator sees their tenant's rows,
and every page shown is audited as a read."""

import pytest
from django.test import Client

from audit.models import AuditEvent
from memory_service.memories.models import ActivityLog
from tenants.context import tenant_context
from tenants.models import User

pytestmark = pytest.mark.django_db

URL = "/admin/memories/activitylog/"


def _admin_of(tenant) -> Client:
    client = Client()
    client.force_login(User.objects.create_user(f"admin-{tenant.slug}", password="x", is_staff=True, tenant=tenant))
    return client


def test_it_lists_the_tenants_searches_and_writes_read_only_and_audits_the_visit(
    tenant, other_tenant, api_client, other_client
):
    api_client.post("/api/v1/memories", {"scope": "repository", "repository": "web", "text": "Use pnpm",
                                         "kind": "decision", "priority": "high"}, format="json")  # fmt: skip
    api_client.post("/api/v1/search", {"query": "package manager", "repository": "web"}, format="json")
    other_client.post("/api/v1/search", {"query": "charlie secret plans", "repository": "web"}, format="json")
    client = _admin_of(tenant)
    page = client.get(URL).content.decode()
    assert "<h1>Activity log entries</h1>" in page and "2 activity log entries" in page
    assert "package manager" in page and "charlie secret plans" not in page
    assert "kind: decision, priority: high, scope: repository" in page
    with tenant_context(other_tenant.id):
        theirs = ActivityLog.objects.get()
    assert client.get(f"{URL}{theirs.id}/change/").status_code in (302, 404)
    assert client.get(f"{URL}add/").status_code == 403
    with tenant_context(tenant.id):
        [visit] = AuditEvent.objects.filter(action="retrieve", resource_type="activity", actor="admin:admin-acme")
    assert visit.details == {"count": 2, "view": "list"}
