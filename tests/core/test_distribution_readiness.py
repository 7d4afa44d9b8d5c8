"""Which tables could be distributed by ``tenant_id`` today (Citus), read from PostgreSQL's catalog.

A table is ready when it has a ``tenant_id`` column, every unique index (its primary key included)
contains ``tenant_id``, and every foreign key to another table with ``tenant_id`` carries it too
(co-located). The list is printed, and docs/scaling.md must show the same list: the document
cannot drift from the schema.
"""

import re
from pathlib import Path

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
BLOCK = re.compile(r"<!-- distribution-readiness: begin -->\n(.*?)<!-- distribution-readiness: end -->", re.S)

_CATALOG = """
WITH t AS (
    SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
), tenant_col AS (
    SELECT t.oid, a.attnum FROM t JOIN pg_attribute a ON a.attrelid = t.oid AND a.attname = 'tenant_id'
)
SELECT t.relname,
       EXISTS (SELECT 1 FROM tenant_col tc WHERE tc.oid = t.oid) AS has_tenant,
       ARRAY(SELECT CASE WHEN i.indisprimary THEN 'primary key' ELSE 'unique ' || i.indexrelid::regclass::text END
             FROM pg_index i WHERE i.indrelid = t.oid AND i.indisunique
               AND NOT EXISTS (SELECT 1 FROM tenant_col tc WHERE tc.oid = t.oid AND tc.attnum = ANY (i.indkey))
             ORDER BY 1) AS unique_without_tenant,
       ARRAY(SELECT DISTINCT con.confrelid::regclass::text FROM pg_constraint con
             WHERE con.conrelid = t.oid AND con.contype = 'f'
               AND EXISTS (SELECT 1 FROM tenant_col tc WHERE tc.oid = con.confrelid)
               AND NOT EXISTS (SELECT 1 FROM tenant_col tc WHERE tc.oid = t.oid AND tc.attnum = ANY (con.conkey))
             ORDER BY 1) AS foreign_keys_without_tenant
FROM t ORDER BY t.relname
"""


def readiness_rows() -> list[str]:
    """One markdown row per table: name, state, and what stops it."""
    with connection.cursor() as cursor:
        cursor.execute(_CATALOG)
        tables = cursor.fetchall()
    rows = []
    for name, has_tenant, unique_without, foreign_without in tables:
        if not has_tenant:
            rows.append(f"| `{name}` | no `tenant_id` | a reference table, or kept on the coordinator |")
            continue
        stops = [f"{what} without `tenant_id`" for what in unique_without]
        stops += [f"foreign key to `{target}` without `tenant_id`" for target in foreign_without]
        rows.append(f"| `{name}` | {'not ready' if stops else '**ready**'} | {'; '.join(stops) or '—'} |")
    return ["| table | today | what stops it |", "|---|---|---|", *rows]


def test_the_scaling_document_lists_each_tables_readiness_as_the_catalog_shows_it():
    expected = "\n".join(readiness_rows()) + "\n"
    print("\n" + expected)
    found = BLOCK.search(DOC.read_text())
    assert found, "docs/scaling.md has no distribution-readiness block"
    assert found.group(1) == expected, f"docs/scaling.md is out of date; the catalog says:\n{expected}"
    assert "| `memories_memory` |" in expected and "| `tenants_tenant` | no `tenant_id` |" in expected
