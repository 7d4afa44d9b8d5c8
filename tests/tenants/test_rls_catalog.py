"""Row-level security read back from PostgreSQL's catalog, not from Django's models.

Every relation of schema ``public`` with a ``tenant_id`` column (and the tenant table itself) must
have RLS enabled and forced, with exactly the policies written below, and no other table may have
policies at all. A table whose migration forgot ``EnableTenantRLS``, a policy widened or added
(``USING (true)``), a view over tenant rows, or a new function that reads past RLS fails the build.
"""

import pytest
from django.contrib.auth.models import Permission as ModelPermission
from django.db import connections, transaction
from django.test import Client

from tenants.models import User
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(databases=["default", "admin"])


def _isolation(column: str) -> tuple:
    check = f"({column} = app_current_tenant())"
    return ("PERMISSIVE", ("public",), "ALL", check, check)


# table → {policy name: (permissive, roles, command, USING, WITH CHECK)}, as pg_policies shows them.
EXPECTED_POLICIES = {
    "audit_auditevent": {"tenant_isolation": _isolation("tenant_id")},
    "exports_exportjob": {"tenant_isolation": _isolation("tenant_id")},
    "memories_activitylog": {"tenant_isolation": _isolation("tenant_id")},
    "memories_memory": {"tenant_isolation": _isolation("tenant_id")},
    "memories_memoryembedding": {"tenant_isolation": _isolation("tenant_id")},
    "memories_ownerlexemestats": {"tenant_isolation": _isolation("tenant_id")},
    "memories_ownerlexicalstats": {"tenant_isolation": _isolation("tenant_id")},
    "memories_scopevector": {"tenant_isolation": _isolation("tenant_id")},
    "memories_supersession": {"tenant_isolation": _isolation("tenant_id")},
    "proposals_agentsdocument": {"tenant_isolation": _isolation("tenant_id")},
    "proposals_agentsdocumentversion": {"tenant_isolation": _isolation("tenant_id")},
    "proposals_proposal": {"tenant_isolation": _isolation("tenant_id")},
    "session_context_sessioncontext": {"tenant_isolation": _isolation("tenant_id")},
    "tenants_tenant": {"tenant_isolation": _isolation("id")},
    "tenants_apitoken": {
        "tenant_isolation": _isolation("tenant_id"),
        # Authentication reads one token by its lookup prefix before the tenant is known: the
        # one policy that is not the tenant's, and it only reads.
        "token_lookup": (
            "PERMISSIVE",
            ("public",),
            "SELECT",
            "((prefix)::text = NULLIF(current_setting('app.token_prefix'::text, true), ''::text))",
            None,
        ),  # fmt: skip
    },
}
# Tables with a tenant_id column and no RLS, and why.
WITHOUT_RLS = {
    # Admin logins: Django reads a user by username before any tenant is known. Only superusers'
    # admin pages show users (test_it_shows_admin_users_to_superusers_only).
    "tenants_user": "admin logins",
}
# Functions that run as their owner, who may bypass RLS: each reads past it on purpose.
SECURITY_DEFINER_FUNCTIONS = {
    "app_active_tenant_ids",  # which tenants are active (tenants/migrations/0001)
    "app_audit_tenant_ids",  # which tenants have audit chains (audit/migrations/0002)
    "memory_lexical_matches",  # the full-text stage of a search, for the transaction's tenant (memories/0009)
}

_TENANT_RELATIONS = """
    SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND (c.relname = 'tenants_tenant' OR EXISTS (
          SELECT 1 FROM pg_attribute a
          WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped))
"""
_POLICIES = """
    SELECT tablename, policyname, permissive, roles::text[], cmd, qual, with_check
    FROM pg_policies WHERE schemaname = 'public'
"""
_SECURITY_DEFINERS = """
    SELECT p.proname, coalesce(array_to_string(p.proconfig, ','), '')
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public' AND p.prosecdef
"""


def rls_catalog_problems(cursor) -> list[str]:
    """Every way the catalog differs from the expected tables above, one line each (empty: none)."""
    problems = []
    cursor.execute(_TENANT_RELATIONS)
    relations = {name: (kind, enabled, forced) for name, kind, enabled, forced in cursor.fetchall()}
    for name, (kind, enabled, forced) in sorted(relations.items()):
        if kind not in ("r", "p"):
            problems.append(f"{name}: a relation of kind {kind!r} over tenant rows (row-level security cannot apply)")
        elif name in WITHOUT_RLS:
            if enabled or forced:
                problems.append(f"{name}: row-level security is on, yet {WITHOUT_RLS[name]} read it without a tenant")
        elif name not in EXPECTED_POLICIES:
            problems.append(f"{name}: has a tenant_id column but is not among the expected tenant tables")
        elif not (enabled and forced):
            problems.append(f"{name}: row-level security enabled={enabled}, forced={forced}")
    for name in sorted(EXPECTED_POLICIES.keys() - relations.keys()):
        problems.append(f"{name}: expected tenant table is missing")

    cursor.execute(_POLICIES)
    actual: dict[str, dict[str, tuple]] = {}
    for table, policy, permissive, roles, command, qual, with_check in cursor.fetchall():
        actual.setdefault(table, {})[policy] = (permissive, tuple(roles), command, qual, with_check)
    for table in sorted(actual.keys() | EXPECTED_POLICIES.keys()):
        found, expected = actual.get(table, {}), EXPECTED_POLICIES.get(table, {})
        for policy in sorted(found.keys() | expected.keys()):
            if policy not in expected:
                problems.append(f"{table}: unexpected policy {policy} {found[policy]}")
            elif policy not in found:
                problems.append(f"{table}: policy {policy} is missing")
            elif found[policy] != expected[policy]:
                problems.append(f"{table}: policy {policy} is {found[policy]}, expected {expected[policy]}")

    cursor.execute(_SECURITY_DEFINERS)
    definers = dict(cursor.fetchall())
    for name in sorted(definers.keys() - SECURITY_DEFINER_FUNCTIONS):
        problems.append(f"{name}: an unexpected SECURITY DEFINER function (it may read past row-level security)")
    for name in sorted(SECURITY_DEFINER_FUNCTIONS - definers.keys()):
        problems.append(f"{name}: expected SECURITY DEFINER function is missing")
    for name in sorted(SECURITY_DEFINER_FUNCTIONS & definers.keys()):
        if "search_path=" not in definers[name]:
            problems.append(f"{name}: a SECURITY DEFINER function without its own search_path")
    return problems


def test_it_finds_rls_enabled_forced_and_exactly_the_expected_policies_in_the_catalog():
    with connections["default"].cursor() as cursor:
        assert rls_catalog_problems(cursor) == []


BREAKAGES = {
    "an extra permissive policy": (
        "CREATE POLICY peek ON memories_memory FOR SELECT USING (true)",
        "memories_memory: unexpected policy peek ('PERMISSIVE', ('public',), 'SELECT', 'true', None)",
    ),
    "a widened policy": (
        "ALTER POLICY tenant_isolation ON proposals_proposal USING (true)",
        "proposals_proposal: policy tenant_isolation is ('PERMISSIVE', ('public',), 'ALL', 'true', ",
    ),
    "a dropped policy": (
        "DROP POLICY token_lookup ON tenants_apitoken",
        "tenants_apitoken: policy token_lookup is missing",
    ),
    "a policy on a table without tenants": (
        "ALTER TABLE django_session ENABLE ROW LEVEL SECURITY; CREATE POLICY anyone ON django_session USING (true)",
        "django_session: unexpected policy anyone",
    ),
    "a tenant table without RLS": (
        "CREATE TABLE forgotten_notes (id bigint PRIMARY KEY, tenant_id uuid NOT NULL, body text)",
        "forgotten_notes: has a tenant_id column but is not among the expected tenant tables",
    ),
    "RLS not forced": (
        "ALTER TABLE exports_exportjob NO FORCE ROW LEVEL SECURITY",
        "exports_exportjob: row-level security enabled=True, forced=False",
    ),
    "a view over tenant rows": (
        "CREATE VIEW all_memories AS SELECT tenant_id, text FROM memories_memory",
        "all_memories: a relation of kind 'v' over tenant rows",
    ),
    "a function that reads past RLS": (
        "CREATE FUNCTION count_every_memory() RETURNS bigint LANGUAGE sql SECURITY DEFINER "
        "AS $$ SELECT count(*) FROM memories_memory $$",
        "count_every_memory: an unexpected SECURITY DEFINER function",
    ),
}


class _RollBack(Exception):
    pass


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_it_fails_the_catalog_check_when_rls_is_weakened(breakage):
    sql, expected = BREAKAGES[breakage]
    with pytest.raises(_RollBack), transaction.atomic(using="admin"), connections["admin"].cursor() as cursor:
        cursor.execute(sql)  # as the schema owner, inside a savepoint rolled back below
        problems = rls_catalog_problems(cursor)
        raise _RollBack
    assert len(problems) == 1 and problems[0].startswith(expected), problems
    with connections["admin"].cursor() as cursor:
        assert rls_catalog_problems(cursor) == []


def test_it_shows_admin_users_to_superusers_only():
    """tenants_user has no RLS (WITHOUT_RLS): tenant administrators never reach its pages, not even
    with every permission on users granted, and never another tenant's administrators."""
    alpha, bravo = make_tenant("alpha"), make_tenant("bravo")
    alice = User.objects.create_user("alice", password="x", is_staff=True, tenant=alpha)
    bob = User.objects.create_user("bob-of-bravo", password="x", is_staff=True, tenant=bravo)
    alice.user_permissions.set(ModelPermission.objects.filter(content_type__app_label="tenants",
                                                               content_type__model="user"))  # fmt: skip
    client = Client()
    client.force_login(alice)
    assert "/admin/tenants/user/" not in client.get("/admin/").content.decode()
    for url in ("/admin/tenants/user/", f"/admin/tenants/user/{bob.pk}/change/", "/admin/tenants/user/add/",
                f"/admin/tenants/user/{bob.pk}/delete/", f"/admin/tenants/user/{bob.pk}/password/"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 403, url
        assert "bob-of-bravo" not in response.content.decode()


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_shows_superusers_the_administrators_of_every_tenant():
    for slug in ("alpha", "bravo"):
        User.objects.create_user(f"admin-of-{slug}", password="x", is_staff=True, tenant=make_tenant(slug))
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    users_page = client.get("/admin/tenants/user/").content.decode()
    assert "admin-of-alpha" in users_page and "admin-of-bravo" in users_page
