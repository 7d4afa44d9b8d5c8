"""Which tenants have an audit chain, for the job that checkpoints every chain's head.

The checkpoint job runs as the application's role and reads each chain under that tenant's RLS;
this is the only thing it learns across tenants: whose chains exist (deactivated tenants' too,
whose chains must still be checkpointed). It runs as the schema owner, like
``app_active_tenant_ids``, and skips from one tenant to the next along the (tenant, seq) index
instead of reading every event.
"""

from django.db import migrations

AUDIT_TENANT_IDS = """
CREATE FUNCTION app_audit_tenant_ids() RETURNS SETOF uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    WITH RECURSIVE chains(tenant_id) AS (
        (SELECT e.tenant_id FROM public.audit_auditevent e ORDER BY e.tenant_id LIMIT 1)
        UNION ALL
        SELECT (SELECT e.tenant_id FROM public.audit_auditevent e
                WHERE e.tenant_id > chains.tenant_id ORDER BY e.tenant_id LIMIT 1)
        FROM chains WHERE chains.tenant_id IS NOT NULL
    )
    SELECT tenant_id FROM chains WHERE tenant_id IS NOT NULL
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [
        migrations.RunSQL(AUDIT_TENANT_IDS, "DROP FUNCTION IF EXISTS app_audit_tenant_ids()"),
    ]
