r"""Full-text candidates from one GIN key per (tenant, scope owner, lexeme).

The index of 0007 held two kinds of keys, the tenant-qualified owner and the lexeme, and the match
intersected their posting lists: the owner's rows with every row of the table that holds a query
term. At a million memories a common term's list runs to a third of the table, so a small tenant's
match spent ~1 ms and a large one's ~4 ms decoding other tenants' postings. Here each memory is
filed under ``memory_lexeme_key(tenant, owner, lexeme)`` for each of its lexemes (a 64-bit hash,
``hashtextextended``; a collision only adds rows that the ``@@`` and tenant checks then drop), and
the match reads exactly the owners' postings of the query's lexemes. At 1M memories, 200 searches'
text statements replayed alternately three times: p50 10.2 → 8.7 ms, mean 12.8 → 11.6 (every
tenant class 0.9–2.1 ms faster at p50), identical results in 600 of 600; the index is 482 MB
instead of 126 MB and builds in ~75 s (bench/perf/analysis.md).

``memory_query_lexemes`` reads a tsquery's lexemes from its text form, where each is quoted with
``'`` and ``\`` doubled (the parser of the ``simple`` configuration produces neither). A hash
function that changed between PostgreSQL versions would need ``REINDEX INDEX
memory_owner_lexeme_hashes``; ``hashtextextended`` also places rows of hash partitions, which
keeps it stable.
"""

from importlib import import_module

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import migrations
from django.db.models import BigIntegerField, F, Func

migration_0007 = import_module("memory_service.memories.migrations.0007_tenant_owner_lexemes")

LEXEME_KEY = """
CREATE FUNCTION memory_lexeme_key(tenant uuid, owner_key text, lexeme text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT hashtextextended(tenant::text || '/' || owner_key || '/' || lexeme, 0) $$;

CREATE FUNCTION memory_owner_lexeme_keys(tenant uuid, owner_key text, lexemes tsvector) RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY(SELECT public.memory_lexeme_key(tenant, owner_key, lexeme) FROM unnest(tsvector_to_array(lexemes)) AS lexeme)
$$;
"""

# Owner keys never hold "/" (identifiers are [A-Za-z0-9._:-]), so tenant/owner/lexeme is unambiguous.
QUERY_LEXEMES = r"""
CREATE FUNCTION memory_query_lexemes(query tsquery) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY(SELECT replace(replace(quoted[1], '''''', ''''), '\\', '\')
                 FROM regexp_matches(query::text, '''((?:[^''\\]|''''|\\\\)*)''', 'g') AS quoted)
$$;
"""

LEXICAL_MATCHES = """
CREATE FUNCTION memory_lexical_matches(owner_keys text[], query tsquery, max_rows integer)
RETURNS TABLE (id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
-- The planner cannot estimate an overlap of computed keys and would plan parallel workers for a
-- few hundred rows.
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    tenant uuid := public.app_current_tenant();
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    -- The keys are the transaction's tenant's own; the tenant check of each row is a filter (IS
    -- NOT DISTINCT FROM). OFFSET 0 keeps @@ out of the index scan: it is checked on the rows the
    -- keys found, never by intersecting with the table-wide lexemes of another index.
    RETURN QUERY EXECUTE
        'SELECT m.id, ts_rank(m.search_vector, $2, 1) AS rank
         FROM (SELECT m.id, m.search_vector FROM public.memories_memory m
               WHERE public.memory_owner_lexeme_keys(m.tenant_id, m.owner_key, m.search_vector) && $1
                 AND m.tenant_id IS NOT DISTINCT FROM $4 OFFSET 0) m
         WHERE m.search_vector @@ $2
         ORDER BY rank DESC, m.id LIMIT $3'
        USING ARRAY(SELECT public.memory_lexeme_key(tenant, k, lexeme)
                    FROM unnest(owner_keys) AS k, unnest(public.memory_query_lexemes(query)) AS lexeme),
              query, max_rows, tenant;
END $$;
"""

DROP_LEXICAL_MATCHES = "DROP FUNCTION IF EXISTS memory_lexical_matches(text[], tsquery, integer)"


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_scope_vector_owner_rows")]

    operations = [
        migrations.RunSQL(
            LEXEME_KEY,
            "DROP FUNCTION IF EXISTS memory_owner_lexeme_keys(uuid, text, tsvector);"
            " DROP FUNCTION IF EXISTS memory_lexeme_key(uuid, text, text)",
        ),
        migrations.RunSQL(QUERY_LEXEMES, "DROP FUNCTION IF EXISTS memory_query_lexemes(tsquery)"),
        migrations.AddIndex(
            model_name="memory",
            index=GinIndex(
                Func(
                    F("tenant"),
                    F("owner_key"),
                    F("search_vector"),
                    function="memory_owner_lexeme_keys",
                    output_field=ArrayField(BigIntegerField()),
                ),
                name="memory_owner_lexeme_hashes",
                fastupdate=False,
            ),
        ),
        migrations.RunSQL(
            f"{DROP_LEXICAL_MATCHES}; {LEXICAL_MATCHES}", f"{DROP_LEXICAL_MATCHES}; {migration_0007.LEXICAL_MATCHES}"
        ),
        # (Reversed, the index of 0007 comes back with the statistics target 0007 gave it.)
        migrations.RunSQL(migrations.RunSQL.noop, migration_0007.OWNER_STATISTICS),
        migrations.RemoveIndex(model_name="memory", name="memory_tenant_owner_lexemes"),
        migrations.RunSQL(
            "DROP FUNCTION IF EXISTS memory_tenant_owner_key(uuid, text)", migration_0007.TENANT_OWNER_KEY
        ),
    ]
