"""Export jobs in the admin: read-only, with progress, each tenant administrator sees their own."""

import pytest
from django.test import Client

from memory_service.exports.services import export_job_start
from tenants.models import User
from tests.factories import make_tenant

URL = "/admin/exports/exportjob/"


def _admin_of(tenant) -> Client:
    client = Client()
    client.force_login(User.objects.create_user(f"admin-{tenant.slug}", password="x", is_staff=True, tenant=tenant))
    return client


@pytest.mark.django_db
def test_it_lists_only_the_tenant_admins_exports_read_only():
    alpha, bravo = make_tenant("alpha"), make_tenant("bravo")
    mine = export_job_start(tenant=alpha, actor="system:tests", user="u1", enqueue=False)
    theirs = export_job_start(tenant=bravo, actor="system:tests", enqueue=False)
    client = _admin_of(alpha)
    page = client.get(URL).content.decode()
    assert f"/{mine.id}/change/" in page and f"/{theirs.id}/change/" not in page
    assert "<progress" in page and "user u1" in page
    assert client.get(f"{URL}{theirs.id}/change/").status_code in (302, 404)
    assert client.get(f"{URL}add/").status_code == 403
    assert client.get(f"{URL}{mine.id}/delete/").status_code == 403
    assert "Save" not in client.get(f"{URL}{mine.id}/change/").content.decode()
