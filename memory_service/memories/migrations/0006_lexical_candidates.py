"""Full-text candidates from a GIN index of (owner key, lexemes), through one privileged function.

Under row-level security ``search_vector @@ query`` is never an index condition: ``@@`` is not
leakproof, so PostgreSQL evaluates it only after the policy, row by row, on every row of the
scope. ``memory_lexical_candidates`` runs as the schema owner (past RLS) so the GIN index answers
the match, and admits only the current tenant's rows, exactly as the policy does. The caller still
reads every candidate through RLS and checks it against the scope's full filter.
"""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations

LEXICAL_CANDIDATES = """
CREATE FUNCTION memory_lexical_candidates(owner_keys text[], query tsquery, max_rows integer)
RETURNS TABLE (id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    -- A one-shot statement: planned with these owner keys and this query, never generically.
    RETURN QUERY EXECUTE
        'SELECT m.id, ts_rank(m.search_vector, $2, 1) AS rank FROM public.memories_memory m
         WHERE m.tenant_id = public.app_current_tenant() AND m.owner_key = ANY($1) AND m.search_vector @@ $2
         ORDER BY rank DESC, m.id LIMIT $3'
        USING owner_keys, query, max_rows;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0005_scope_vectors")]

    operations = [
        migrations.RunSQL("CREATE EXTENSION IF NOT EXISTS btree_gin", migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="memory", name="memory_search_vector"),
        migrations.AddIndex(
            model_name="memory",
            index=GinIndex(fields=["owner_key", "search_vector"], name="memory_owner_search_vector", fastupdate=False),
        ),
        # Owners are skewed (a team repository holds thousands of rows, a user a handful): with the
        # default sample the planner took a 4k-row owner for 130 rows and skipped the GIN index.
        migrations.RunSQL(
            "ALTER TABLE memories_memory ALTER COLUMN owner_key SET STATISTICS 1000",
            "ALTER TABLE memories_memory ALTER COLUMN owner_key SET STATISTICS -1",
        ),
        migrations.RunSQL(
            LEXICAL_CANDIDATES, "DROP FUNCTION IF EXISTS memory_lexical_candidates(text[], tsquery, integer)"
        ),
    ]
