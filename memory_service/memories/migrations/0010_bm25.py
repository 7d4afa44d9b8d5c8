r"""BM25 in the full-text stage (retrieval.candidates).

``ts_rank`` counts how often the query's terms occur, not how rare they are: "went" and "really"
weighed like "pottery". ``memory_lexical_matches`` now scores Okapi BM25 over the scope owners'
memories, with the constants of ``BM25_K1`` and ``BM25_B``:

    score(d, q) = Σ over the distinct terms t of q found in d of
                  ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5)) · tf · (k1 + 1) / (tf + k1 · (1 - b + b · |d| / avgdl))

- ``tf``: the term's positions in the memory's tsvector; ``|d|`` (``Memory.lexical_length``, a
  stored generated column): all positions of all its lexemes.
- ``n(t)``: how many of the owners' memories hold the term. The function reads every memory of the
  owners that holds a query term anyway (one GIN key per tenant, owner and lexeme, migration 0009),
  so it counts them exactly, per term, in the same pass.
- ``N`` and ``avgdl``: from ``OwnerLexicalStats``, one row per owner kept by statement-level
  triggers on the memory table (whoever writes: the service, bulk loads, deletions, tenant erasure).
- ``ideal`` (the same on every row): the sum of the IDFs of the query terms that occur in the
  owners' memories, the score of a memory of average length holding each of them once: what a
  search divides the scores by, so that a weak match stays weak (``retrieval.search.fuse``).

The terms of each matching memory are picked out of its tsvector by marking the query's lexemes
with weight A (``setweight`` with a lexeme list) and keeping only those (``ts_filter``): two passes
in C instead of unnesting every lexeme in SQL.
"""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

import tenants.rls

migration_0009 = import_module("memory_service.memories.migrations.0009_owner_lexeme_keys")

BM25_K1 = 1.2
BM25_B = 0.75

DOCUMENT_LENGTH = """
CREATE FUNCTION memory_document_length(lexemes tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(cardinality(t.positions), 1)), 0)::integer FROM unnest(lexemes) AS t
$$;
"""

# One function for the three triggers: each passes the transition tables its event has.
STATS_TRIGGER = """
CREATE FUNCTION memory_lexical_stats_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memories_ownerlexicalstats AS s (tenant_id, owner_key, documents, terms)
        SELECT tenant_id, owner_key, count(*), coalesce(sum(lexical_length), 0)
        FROM new_rows GROUP BY tenant_id, owner_key ORDER BY tenant_id, owner_key
        ON CONFLICT (tenant_id, owner_key)
        DO UPDATE SET documents = s.documents + excluded.documents, terms = s.terms + excluded.terms;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO memories_ownerlexicalstats AS s (tenant_id, owner_key, documents, terms)
        SELECT tenant_id, owner_key, sum(documents), sum(terms) FROM (
            SELECT tenant_id, owner_key, 1 AS documents, coalesce(lexical_length, 0) AS terms FROM new_rows
            UNION ALL
            SELECT tenant_id, owner_key, -1, -coalesce(lexical_length, 0) FROM old_rows) change
        GROUP BY tenant_id, owner_key HAVING sum(documents) <> 0 OR sum(terms) <> 0
        ORDER BY tenant_id, owner_key
        ON CONFLICT (tenant_id, owner_key)
        DO UPDATE SET documents = s.documents + excluded.documents, terms = s.terms + excluded.terms;
    ELSE
        UPDATE memories_ownerlexicalstats s
        SET documents = s.documents - gone.documents, terms = s.terms - gone.terms
        FROM (SELECT tenant_id, owner_key, count(*) AS documents, coalesce(sum(lexical_length), 0) AS terms
              FROM old_rows GROUP BY tenant_id, owner_key ORDER BY tenant_id, owner_key) gone
        WHERE s.tenant_id = gone.tenant_id AND s.owner_key = gone.owner_key;
    END IF;
    DELETE FROM memories_ownerlexicalstats s
    USING (SELECT DISTINCT tenant_id, owner_key FROM old_rows) touched
    WHERE s.tenant_id = touched.tenant_id AND s.owner_key = touched.owner_key AND s.documents <= 0;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_lexical_stats_insert AFTER INSERT ON memories_memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_stats_apply();
CREATE TRIGGER memory_lexical_stats_update AFTER UPDATE ON memories_memory
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_stats_apply();
CREATE TRIGGER memory_lexical_stats_delete AFTER DELETE ON memories_memory
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_stats_apply();
"""
DROP_STATS_TRIGGER = """
DROP TRIGGER IF EXISTS memory_lexical_stats_insert ON memories_memory;
DROP TRIGGER IF EXISTS memory_lexical_stats_update ON memories_memory;
DROP TRIGGER IF EXISTS memory_lexical_stats_delete ON memories_memory;
DROP FUNCTION IF EXISTS memory_lexical_stats_apply();
"""

# The migration runs as the schema's owner (BYPASSRLS): every tenant's owners are counted.
STATS_BACKFILL = """
INSERT INTO memories_ownerlexicalstats (tenant_id, owner_key, documents, terms)
SELECT tenant_id, owner_key, count(*), coalesce(sum(lexical_length), 0) FROM memories_memory GROUP BY tenant_id, owner_key
"""

LEXICAL_MATCHES = f"""
CREATE FUNCTION memory_lexical_matches(owner_keys text[], query tsquery, max_rows integer)
RETURNS TABLE (id uuid, rank real, ideal real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
-- The planner cannot estimate an overlap of computed keys and would plan parallel workers for a
-- few hundred rows.
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    tenant uuid := public.app_current_tenant();
    lexemes text[] := public.memory_query_lexemes(query);
    corpus_documents float8;
    corpus_terms float8;
BEGIN
    IF tenant IS NULL OR cardinality(lexemes) = 0 THEN
        RETURN;
    END IF;
    SELECT sum(s.documents), sum(s.terms) INTO corpus_documents, corpus_terms
    FROM public.memories_ownerlexicalstats s WHERE s.tenant_id = tenant AND s.owner_key = ANY(owner_keys);
    IF coalesce(corpus_documents, 0) <= 0 THEN
        RETURN;
    END IF;
    -- The keys are the transaction's tenant's own; the tenant and owner of each row are checked
    -- as filters (a hash collision only adds rows). OFFSET 0 keeps the rows found by the keys from
    -- being intersected with another index. Every memory of the owners that holds a query term is
    -- in "hits", so a term's document count is exact.
    RETURN QUERY EXECUTE
        'WITH hits AS MATERIALIZED (
             SELECT m.id, m.lexical_length, ts_filter(setweight(m.search_vector, ''A'', $5), ''{{a}}'') AS found
             FROM public.memories_memory m
             WHERE public.memory_owner_lexeme_keys(m.tenant_id, m.owner_key, m.search_vector) && $1
               AND m.tenant_id IS NOT DISTINCT FROM $4 AND m.owner_key = ANY($6)
             OFFSET 0),
         terms AS MATERIALIZED (
             SELECT hits.id, hits.lexical_length, t.lexeme, coalesce(cardinality(t.positions), 1) AS tf
             FROM hits CROSS JOIN LATERAL unnest(hits.found) AS t),
         frequency AS MATERIALIZED (
             SELECT lexeme, ln(1 + ($7 - count(*) + 0.5) / (count(*) + 0.5)) AS idf FROM terms GROUP BY lexeme)
         SELECT terms.id,
                sum(frequency.idf * terms.tf * ({BM25_K1} + 1)
                    / (terms.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * terms.lexical_length / $8)))::real AS rank,
                (SELECT sum(idf) FROM frequency)::real AS ideal
         FROM terms JOIN frequency USING (lexeme)
         GROUP BY terms.id
         ORDER BY rank DESC, terms.id LIMIT $3'
        USING ARRAY(SELECT public.memory_lexeme_key(tenant, k, lexeme)
                    FROM unnest(owner_keys) AS k, unnest(lexemes) AS lexeme),
              query, max_rows, tenant, lexemes, owner_keys, corpus_documents,
              greatest(corpus_terms / corpus_documents, 1);
END $$;
"""

DROP_LEXICAL_MATCHES = migration_0009.DROP_LEXICAL_MATCHES


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0009_owner_lexeme_keys"),
        ("tenants", "0002_tenant_retention"),
    ]

    operations = [
        migrations.RunSQL(DOCUMENT_LENGTH, "DROP FUNCTION IF EXISTS memory_document_length(tsvector)"),
        migrations.AddField(
            model_name="memory",
            name="lexical_length",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    models.F("search_vector"), function="memory_document_length", output_field=models.IntegerField()
                ),
                output_field=models.IntegerField(),
            ),
        ),
        migrations.CreateModel(
            name="OwnerLexicalStats",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "tenant_id", "owner_key", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("owner_key", models.CharField(max_length=160)),
                ("documents", models.BigIntegerField()),
                ("terms", models.BigIntegerField()),
                (
                    "tenant",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="tenants.tenant",
                    ),
                ),
            ],
        ),
        tenants.rls.EnableTenantRLS("ownerlexicalstats"),
        migrations.RunSQL(STATS_TRIGGER, DROP_STATS_TRIGGER),
        migrations.RunSQL(STATS_BACKFILL, migrations.RunSQL.noop),
        migrations.RunSQL(
            f"{DROP_LEXICAL_MATCHES}; {LEXICAL_MATCHES}", f"{DROP_LEXICAL_MATCHES}; {migration_0009.LEXICAL_MATCHES}"
        ),
    ]
