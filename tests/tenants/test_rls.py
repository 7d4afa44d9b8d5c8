"""Row-level security is enforced by PostgreSQL itself, under the application's role."""

import pytest
from django.apps import apps
from django.db import connection, connections, transaction

from memory_service.memories.models import Memory
from tenants.context import query_with_settings, set_current_tenant, tenant_context
from tenants.models import ApiToken, Tenant
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db


def _tenant_tables() -> list[tuple[str, str]]:
    """(table, tenant column) of every model that holds tenant data."""
    tables = []
    for model in apps.get_models():
        if model is Tenant:
            tables.append((model._meta.db_table, "id"))
        elif any(field.name == "tenant" and not field.null for field in model._meta.fields):
            tables.append((model._meta.db_table, "tenant_id"))
    return tables


def test_it_runs_as_a_role_that_cannot_bypass_rls():
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (False, False)


def test_it_enables_and_forces_rls_with_a_policy_on_every_tenant_table():
    tables = _tenant_tables()
    assert ("tenants_apitoken", "tenant_id") in tables
    with connection.cursor() as cursor:
        for table, _column in tables:
            cursor.execute(
                "SELECT c.relrowsecurity, c.relforcerowsecurity, "
                "(SELECT count(*) FROM pg_policies p "
                " WHERE p.tablename = c.relname AND p.policyname = 'tenant_isolation') "
                "FROM pg_class c WHERE c.relname = %s",
                [table],
            )
            assert cursor.fetchone() == (True, True, 1), table


def _add_memory(tenant, text):
    with tenant_context(tenant.id):
        Memory.objects.create(tenant=tenant, scope="user", user="u1", text=text, dedup_key=text, masker_version="test")


def test_it_returns_only_the_current_tenants_rows_to_raw_sql():
    a, b = make_tenant("alpha"), make_tenant("bravo")
    make_token(a, name="a-client")
    make_token(b, name="b-client")
    _add_memory(a, "alpha remembers")
    _add_memory(b, "bravo remembers")

    with tenant_context(a.id), connection.cursor() as cursor:
        cursor.execute("SELECT tenant_id, name FROM tenants_apitoken")
        tokens = cursor.fetchall()
        cursor.execute("SELECT slug FROM tenants_tenant")
        slugs = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT tenant_id, text FROM memories_memory")
        memories = cursor.fetchall()
    assert tokens == [(a.id, "a-client")]
    assert slugs == ["alpha"]
    assert memories == [(a.id, "alpha remembers")]

    with transaction.atomic(), connection.cursor() as cursor:
        set_current_tenant("")
        for table in ("tenants_apitoken", "tenants_tenant", "memories_memory"):
            cursor.execute(f"SELECT count(*) FROM {table}")
            assert cursor.fetchone() == (0,), table


def test_it_refuses_to_write_a_row_for_another_tenant():
    a, b = make_tenant("alpha"), make_tenant("bravo")
    token = make_token(a).token
    with tenant_context(b.id):
        assert ApiToken.objects.filter(pk=token.pk).update(name="stolen") == 0
    with pytest.raises(Exception, match="row-level security"), tenant_context(a.id), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tenants_apitoken (id, prefix, hashed_key, created, name, revoked, tenant_id, permissions, "
            "\"user\", repositories) VALUES ('x.y', 'x', 'y', now(), 'n', false, %s, '{}', '', '{}')",
            [b.id],
        )


def test_it_restores_the_outer_tenant_after_a_nested_context():
    a, b = make_tenant("alpha"), make_tenant("bravo")
    with tenant_context(a.id):
        with tenant_context(b.id):
            assert list(Tenant.objects.values_list("slug", flat=True)) == ["bravo"]
        assert list(Tenant.objects.values_list("slug", flat=True)) == ["alpha"]


def test_it_runs_a_batch_after_its_settings_and_returns_what_they_replaced():
    a, b = make_tenant("alpha"), make_tenant("bravo")
    with tenant_context(a.id):
        previous, found = query_with_settings(
            {"app.tenant_id": str(b.id)}, "SELECT 1; SELECT slug FROM tenants_tenant ORDER BY slug", []
        )
        assert previous == {"app.tenant_id": str(a.id)}
        assert found == [("bravo",)]  # the last statement's rows, under the new setting
        assert list(Tenant.objects.values_list("slug", flat=True)) == ["bravo"]


@pytest.mark.django_db(transaction=True)
def test_it_refuses_settings_outside_a_transaction():
    with pytest.raises(RuntimeError, match="open transaction"):
        query_with_settings({"app.tenant_id": "x"}, "SELECT 1", [])


def test_it_keeps_the_application_role_away_from_the_schema():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT has_table_privilege(current_user, 'tenants_apitoken', 'TRUNCATE'), "
            "pg_get_userbyid(relowner) = current_user FROM pg_class WHERE relname = 'tenants_apitoken'"
        )
        assert cursor.fetchone() == (False, False)
    assert connections["default"].settings_dict["USER"] != connections["admin"].settings_dict["USER"]
