"""Audit inspection in the admin: read-only, filtered, exported, verified, tenant-scoped."""

import re

import pytest
from django.test import Client

from audit.models import AuditEvent
from audit.services import audit_event_record
from tenants.context import tenant_context
from tenants.models import User
from tests.factories import make_tenant, make_token

URL = "/admin/audit/auditevent/"


@pytest.fixture
def two_tenants(db):
    alpha, bravo = make_tenant("alpha"), make_tenant("bravo")
    make_token(alpha, name="alpha-agent")
    make_token(bravo, name="bravo-agent")
    return alpha, bravo


def _admin_of(tenant) -> Client:
    client = Client()
    client.force_login(User.objects.create_user(f"admin-{tenant.slug}", password="x", is_staff=True, tenant=tenant))
    return client


@pytest.mark.django_db
def test_it_lists_only_the_tenant_admins_events_and_records_the_visit(two_tenants):
    alpha, bravo = two_tenants
    page = _admin_of(alpha).get(URL).content.decode()
    with tenant_context(bravo.id):
        bravo_token_event = AuditEvent.objects.get(action="token_created")
    assert "token_created" in page and "alpha" in page
    assert f"/{bravo_token_event.id}/change/" not in page
    with tenant_context(alpha.id):
        visit = AuditEvent.objects.filter(action="retrieve", resource_type="audit_event").get()
    assert visit.actor == "admin:admin-alpha" and visit.details == {"view": "list", "count": 1}


@pytest.mark.django_db
def test_it_is_read_only_even_for_tenant_admins(two_tenants):
    alpha, _ = two_tenants
    client = _admin_of(alpha)
    with tenant_context(alpha.id):
        event = AuditEvent.objects.first()
    assert client.get(f"{URL}add/").status_code == 403
    assert client.get(f"{URL}{event.id}/delete/").status_code == 403
    detail = client.get(f"{URL}{event.id}/change/")
    assert detail.status_code == 200 and "Save" not in detail.content.decode()


@pytest.mark.django_db
def test_it_filters_searches_by_resource_id_and_exports_csv_audited(two_tenants):
    alpha, _ = two_tenants
    client = _admin_of(alpha)
    with tenant_context(alpha.id):
        prefix = AuditEvent.objects.get(action="token_created").resource_ids[0]
    found = client.get(URL, {"q": prefix}).content.decode()
    assert prefix in found
    assert prefix not in client.get(URL, {"action__exact": "offload"}).content.decode()
    export = client.get(f"{URL}export/", {"action__exact": "token_created"})
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    rows = export.content.decode().strip().splitlines()
    assert len(rows) == 2 and prefix in rows[1]
    with tenant_context(alpha.id):
        exported = AuditEvent.objects.get(action="audit_exported")
    assert exported.details == {"rows": 1, "format": "csv"}


@pytest.mark.django_db
def test_it_reports_the_chain_verification(two_tenants):
    alpha, _ = two_tenants
    response = _admin_of(alpha).get(f"{URL}verify/", follow=True)
    assert [str(m) for m in response.context["messages"]] == ["alpha: 1 events, chain intact."]


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_shows_superusers_every_tenant_but_lets_nobody_edit():
    make_token(make_tenant("alpha"), name="alpha-agent")
    make_token(make_tenant("bravo"), name="bravo-agent")
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    page = client.get(URL).content.decode()
    assert "alpha" in page and "bravo" in page
    assert client.get(f"{URL}add/").status_code == 403


@pytest.mark.django_db
def test_it_shortens_long_resource_ids_and_keeps_them_whole_in_the_tooltip_escaped(two_tenants):
    alpha, bravo = two_tenants
    memory_id = "0ea6d45e-144b-429a-8ab6-17a5eb8b152f"
    forged = '"><script>alert(1)</script>-long-id'
    audit_event_record(
        tenant=alpha, actor="system:tests", action="delete", resource_type="memory",
        resource_ids=[memory_id, "short-id", forged, "a", "b"],
    )  # fmt: skip
    audit_event_record(tenant=alpha, actor=f"system:export:{memory_id}", action="export_finished",
                       resource_type="export", resource_ids=[memory_id])  # fmt: skip
    audit_event_record(tenant=bravo, actor="system:tests", action="delete", resource_type="memory",
                       resource_ids=["bravo-memory-id-0001"])  # fmt: skip
    client = _admin_of(alpha)
    page = client.get(URL, {"action__exact": "delete"}).content.decode()
    cell = re.search(r'<td class="field-resources">(.*?)</td>', page).group(1)
    assert cell == (
        f'<span class="short-id" title="{memory_id}">0ea6d45e…</span>, short-id, '
        '<span class="short-id" title="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;-long-id">'
        "&quot;&gt;&lt;scrip…</span> (+2)"
    )
    assert "<script>alert" not in page and "bravo-memory-id-0001" not in page
    page = client.get(URL, {"action__exact": "export_finished"}).content.decode()
    actor = re.search(r'<td class="field-actor_shown">(.*?)</td>', page).group(1)
    assert actor == f'system:export:<span class="short-id" title="{memory_id}">0ea6d45e…</span>'
    assert "audit/admin.css" in page  # one line per row: the list's stylesheet keeps cells from wrapping
