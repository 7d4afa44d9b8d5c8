"""Full-text candidates keyed by tenant and scope owner, so the match never reads another tenant's rows.

Scope owners are the clients' own names ("repository:backend", "user:u1"): many tenants have a
``backend`` repository. The GIN index of 0006 was keyed by owner alone, so the match of one tenant
read every tenant's rows of that owner (up to half of them, at a million memories) and the planner
intersected it with a bitmap of the whole tenant (tens of thousands of rows, 2–5 ms for a large
one). Keyed by ``memory_tenant_owner_key(tenant, owner)`` the index answers for the tenant's own
scope owners only. At 1M memories, 230 searches replayed: the match took p50 9.0 → 6.2 ms (large
tenants 10.9 → 7.9, medium 7.0 → 3.7) with identical results (bench/perf/analysis.md).

``memory_lexical_matches`` replaces ``memory_lexical_candidates``: it runs as the schema owner
(past RLS, so the GIN index can answer ``@@``), builds the keys from the transaction's tenant
itself, and still checks each row's tenant.
"""

from importlib import import_module

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations
from django.db.models import F, Func, TextField

TENANT_OWNER_KEY = """
CREATE FUNCTION memory_tenant_owner_key(tenant uuid, owner_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT tenant::text || '/' || owner_key $$;
"""

LEXICAL_MATCHES = """
CREATE FUNCTION memory_lexical_matches(owner_keys text[], query tsquery, max_rows integer)
RETURNS TABLE (id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    tenant uuid := public.app_current_tenant();
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    -- A one-shot statement: planned with these keys and this query, never generically. The keys
    -- are the transaction's tenant's own; the tenant check of each row is a filter (IS NOT
    -- DISTINCT FROM), never a second index scan of the whole tenant.
    RETURN QUERY EXECUTE
        'SELECT m.id, ts_rank(m.search_vector, $2, 1) AS rank FROM public.memories_memory m
         WHERE public.memory_tenant_owner_key(m.tenant_id, m.owner_key) = ANY($1)
           AND m.search_vector @@ $2 AND m.tenant_id IS NOT DISTINCT FROM $4
         ORDER BY rank DESC, m.id LIMIT $3'
        USING ARRAY(SELECT public.memory_tenant_owner_key(tenant, k) FROM unnest(owner_keys) AS k),
              query, max_rows, tenant;
END $$;
"""

OWNER_STATISTICS = "ALTER INDEX memory_tenant_owner_lexemes ALTER COLUMN 1 SET STATISTICS 1000"

# Reversing this migration restores 0006's function as 0006 wrote it.
OLD_LEXICAL_CANDIDATES = import_module("memory_service.memories.migrations.0006_lexical_candidates").LEXICAL_CANDIDATES


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_lexical_candidates")]

    operations = [
        migrations.RunSQL(TENANT_OWNER_KEY, "DROP FUNCTION IF EXISTS memory_tenant_owner_key(uuid, text)"),
        migrations.AddIndex(
            model_name="memory",
            index=GinIndex(
                Func(F("tenant"), F("owner_key"), function="memory_tenant_owner_key", output_field=TextField()),
                F("search_vector"),
                name="memory_tenant_owner_lexemes",
                fastupdate=False,
            ),
        ),
        # Owners are skewed (a team repository holds thousands of rows, a user a handful): see 0006.
        migrations.RunSQL(OWNER_STATISTICS, migrations.RunSQL.noop),
        migrations.RunSQL(LEXICAL_MATCHES, "DROP FUNCTION IF EXISTS memory_lexical_matches(text[], tsquery, integer)"),
        migrations.RunSQL(
            "DROP FUNCTION IF EXISTS memory_lexical_candidates(text[], tsquery, integer)", OLD_LEXICAL_CANDIDATES
        ),
        migrations.RemoveIndex(model_name="memory", name="memory_owner_search_vector"),
    ]
