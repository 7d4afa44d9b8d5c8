"""Row-level security for tenant tables, as migration operations.

Every table with a ``tenant_id`` column gets ``EnableTenantRLS`` in the migration that creates
it. The policy admits a row only when its ``tenant_id`` equals the transaction's
``app.tenant_id`` (set by ``tenants.context``); with no tenant set nothing is visible and nothing
can be written. FORCE applies the policy to the table owner too; only roles with BYPASSRLS (the
``admin`` alias) see across tenants. ``tests/tenants/test_rls_catalog.py`` reads PostgreSQL's
catalog and fails the build if a table with a ``tenant_id`` column lacks it, or if any policy
differs from the expected ones.
"""

from django.db import migrations

CURRENT_TENANT_FUNCTION_SQL = """
CREATE OR REPLACE FUNCTION app_current_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT nullif(current_setting('app.tenant_id', true), '')::uuid $$;
"""


class EnableTenantRLS(migrations.operations.base.Operation):
    """Enable and force RLS on a model's table with the tenant isolation policy.

    ``column`` is the column holding the tenant id (``id`` for the tenant table itself).
    """

    reversible = True
    reduces_to_sql = True

    def __init__(self, model_name: str, column: str = "tenant_id"):
        self.model_name = model_name
        self.column = column

    def state_forwards(self, app_label, state):
        pass

    def _table(self, app_label, state):
        return state.apps.get_model(app_label, self.model_name)._meta.db_table

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        table = schema_editor.quote_name(self._table(app_label, to_state))
        column = schema_editor.quote_name(self.column)
        schema_editor.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        schema_editor.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        schema_editor.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({column} = app_current_tenant()) "
            f"WITH CHECK ({column} = app_current_tenant())"
        )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        table = schema_editor.quote_name(self._table(app_label, from_state))
        schema_editor.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        schema_editor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        schema_editor.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")

    def describe(self):
        return f"Enable row-level security on {self.model_name}"

    @property
    def migration_name_fragment(self):
        return f"rls_{self.model_name.lower()}"
