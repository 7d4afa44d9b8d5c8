"""A tenant's own retention periods, set from the command line."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenants.context import tenant_context
from tenants.models import Tenant
from tests.factories import make_tenant


def _reload(tenant) -> Tenant:
    with tenant_context(tenant.id):
        return Tenant.objects.get(id=tenant.id)


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_sets_and_resets_a_tenants_periods():
    tenant = make_tenant("keeper")
    assert _reload(tenant).export_retention == timedelta(hours=72)
    out = StringIO()
    call_command("set_retention", "keeper", "--export-retention-hours", "24", "--activity-retention-days", "7",
                 stdout=out)  # fmt: skip
    stored = _reload(tenant)
    assert (stored.export_retention_hours, stored.activity_retention_days, stored.session_ttl_hours) == (24, 7, None)
    assert stored.export_retention == timedelta(hours=24) and stored.session_ttl == timedelta(hours=24)
    assert "1 day, 0:00:00" in out.getvalue()
    call_command("set_retention", "keeper", "--export-retention-hours", "default", stdout=StringIO())
    assert _reload(tenant).export_retention_hours is None and _reload(tenant).activity_retention_days == 7
    with pytest.raises(CommandError):
        call_command("set_retention", "keeper", "--session-ttl-hours", "0", stdout=StringIO())
    assert _reload(tenant).session_ttl_hours is None
