"""Export jobs in the admin: read-only, with progress, each tenant administrator sees their own."""

import re

import pytest
from django.test import Client

from memory_service.exports.models import ExportJob, ExportStatus
from memory_service.exports.services import export_job_start
from tenants.context import tenant_context
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


@pytest.mark.django_db
def test_it_shows_progress_only_while_it_means_something():
    alpha = make_tenant("alpha")
    jobs = {status: export_job_start(tenant=alpha, actor="system:tests", enqueue=False) for status in ExportStatus}
    with tenant_context(alpha.id):
        for status, job in jobs.items():
            ExportJob.objects.filter(id=job.id).update(status=status, progress=100 if status != "failed" else 40)
    page = _admin_of(alpha).get(URL).content.decode()
    cells = dict(re.findall(r'<td class="field-status">(\w+)</td><td class="field-progress_bar">(.*?)</td>', page))
    bar = '<progress max="100" value="100"></progress> 100%'
    assert cells == {
        "Queued": bar, "Running": bar, "Succeeded": bar, "Failed": "stopped at 40%", "Expired": "—", "Erased": "—",
    }  # fmt: skip
