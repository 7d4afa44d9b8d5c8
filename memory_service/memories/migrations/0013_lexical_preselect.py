r"""The full-text stage scores a broad query's many matches in two steps.

In a scope of 100,000+ memories (a monorepo) a query of everyday words matches tens of thousands of
them, and scoring each exactly (its query terms picked out of its tsvector and unnested, then
grouped twice) took most of a search. Now, in scopes of more than ``PRESELECT_MIN_DOCUMENTS``
memories, for a query of at most ``PRESELECT_MAX_TERMS`` terms asked for its best ``max_rows``:

1. each match is tested for each query term (``@@`` of the term alone: a binary search in its
   tsvector, no copy), which gives every term's document count, so the IDFs are exact; each match
   gets the BM25 score it would have if each term it holds occurred once;
2. the best ``max(PRESELECT_MIN, PRESELECT_FACTOR · max_rows)`` of them by that score are scored
   exactly (term frequencies from their tsvectors), as before.

With no more matches than that, every match is scored exactly: the same rows and scores as
migration 0012. Past it, a memory whose terms repeat can rank higher exactly than its once-each
score placed it, so one beyond the preselection could be missed. Smaller scopes (whose matches are
too few for the two steps to pay: they made the big tenants' statements slower), a query of more
terms (Japanese bigrams: the per-term tests cost more than they save) and a call without
``max_rows`` (the scan of all matches) take the exact path unchanged. Tests and the benchmark may
set ``memory.lexical_preselect`` (an integer): the two steps, with a preselection of that size, in
a scope of any size.
"""

from importlib import import_module

from django.db import migrations

migration_0010 = import_module("memory_service.memories.migrations.0010_bm25")
migration_0012 = import_module("memory_service.memories.migrations.0012_lexical_matches_one_index")

K1, B = migration_0010.BM25_K1, migration_0010.BM25_B
PRESELECT_MIN_DOCUMENTS = 50_000
PRESELECT_MAX_TERMS = 8
PRESELECT_MIN = 2000
PRESELECT_FACTOR = 20

# Shared by both paths: the owners' memories that hold a query term (read by the lexeme keys; the
# tenant and owner of each row checked as filters), the exact scores of the terms' rows, and the
# keys themselves.
_MATCHES = """FROM public.memories_memory m
             WHERE public.memory_owner_lexeme_keys(m.tenant_id, m.owner_key, m.search_vector) && $1
               AND m.tenant_id IS NOT DISTINCT FROM $4 AND m.owner_key || '''' = ANY($6)
             OFFSET 0"""
_SCORED = f"""SELECT terms.id,
                sum(frequency.idf * terms.tf * ({K1} + 1)
                    / (terms.tf + {K1} * (1 - {B} + {B} * terms.lexical_length / $8)))::real AS rank,
                (SELECT sum(idf) FROM frequency)::real AS ideal
         FROM terms JOIN frequency USING (lexeme)
         GROUP BY terms.id
         ORDER BY rank DESC, terms.id LIMIT $3"""
_KEYS = (
    "ARRAY(SELECT public.memory_lexeme_key(tenant, k, lexeme) FROM unnest(owner_keys) AS k, unnest(lexemes) AS lexeme)"
)

LEXICAL_MATCHES = f"""
CREATE OR REPLACE FUNCTION memory_lexical_matches(owner_keys text[], query tsquery, max_rows integer)
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
    preselect integer;
    singles tsquery[];
    tests text;
    counts text;
    once text;
BEGIN
    IF tenant IS NULL OR cardinality(lexemes) = 0 THEN
        RETURN;
    END IF;
    SELECT sum(s.documents), sum(s.terms) INTO corpus_documents, corpus_terms
    FROM public.memories_ownerlexicalstats s WHERE s.tenant_id = tenant AND s.owner_key = ANY(owner_keys);
    IF coalesce(corpus_documents, 0) <= 0 THEN
        RETURN;
    END IF;
    -- (A term repeated in the query would be counted twice by the per-term columns: exact path.)
    IF max_rows IS NOT NULL AND cardinality(lexemes) <= {PRESELECT_MAX_TERMS}
       AND cardinality(lexemes) = (SELECT count(DISTINCT l) FROM unnest(lexemes) AS l) THEN
        preselect := nullif(current_setting('memory.lexical_preselect', true), '')::integer;
        IF preselect IS NULL AND corpus_documents > {PRESELECT_MIN_DOCUMENTS} THEN
            preselect := greatest({PRESELECT_MIN}, {PRESELECT_FACTOR} * max_rows);
        END IF;
    END IF;
    -- The keys are the transaction's tenant's own; the tenant and owner of each row are checked
    -- as filters (a hash collision only adds rows; the owner check is an expression no index
    -- answers, so the rows found by the keys are not intersected with another index). Every
    -- memory of the owners that holds a query term is in "hits", so a term's document count is
    -- exact.
    IF preselect IS NULL THEN
        RETURN QUERY EXECUTE
            'WITH hits AS MATERIALIZED (
                 SELECT m.id, m.lexical_length, ts_filter(setweight(m.search_vector, ''A'', $5), ''{{a}}'') AS found
                 {_MATCHES}),
             terms AS MATERIALIZED (
                 SELECT hits.id, hits.lexical_length, t.lexeme, coalesce(cardinality(t.positions), 1) AS tf
                 FROM hits CROSS JOIN LATERAL unnest(hits.found) AS t),
             frequency AS MATERIALIZED (
                 SELECT lexeme, ln(1 + ($7 - count(*) + 0.5) / (count(*) + 0.5)) AS idf FROM terms GROUP BY lexeme)
             {_SCORED}'
            USING {_KEYS},
                  query, max_rows, tenant, lexemes, owner_keys, corpus_documents,
                  greatest(corpus_terms / corpus_documents, 1);
        RETURN;
    END IF;
    -- Each term alone as a tsquery, in the order of "lexemes" (the same quoted strings).
    singles := ARRAY(SELECT quoted[1]::tsquery
                     FROM regexp_matches(query::text, '(''(?:[^''\\\\]|''''|\\\\\\\\)*'')', 'g') AS quoted);
    SELECT string_agg(format('m.search_vector @@ $9[%s] AS t%s', i, i), ', ' ORDER BY i),
           string_agg(format('count(*) FILTER (WHERE t%s)', i), ', ' ORDER BY i),
           string_agg(format('CASE WHEN t%s THEN idf.w[%s] ELSE 0 END', i, i), ' + ' ORDER BY i)
      INTO tests, counts, once
      FROM generate_subscripts(lexemes, 1) AS i;
    RETURN QUERY EXECUTE format(
        'WITH hits AS MATERIALIZED (
             SELECT m.id, m.lexical_length, %s
             {_MATCHES}),
         idf AS MATERIALIZED (
             SELECT ARRAY(SELECT CASE WHEN d.n > 0 THEN ln(1 + ($7 - d.n + 0.5) / (d.n + 0.5)) END
                          FROM unnest(held.n) WITH ORDINALITY AS d(n, o) ORDER BY d.o) AS w
             FROM (SELECT ARRAY[%s]::float8[] AS n FROM hits) held),
         preselected AS MATERIALIZED (
             SELECT hits.id FROM hits, idf
             ORDER BY ((%s) * ({K1} + 1) / (1 + {K1} * (1 - {B} + {B} * hits.lexical_length / $8))) DESC, hits.id
             LIMIT $10),
         frequency AS (
             SELECT l.lexeme, idf.w[l.o] AS idf FROM idf, unnest($5) WITH ORDINALITY AS l(lexeme, o)
             WHERE idf.w[l.o] IS NOT NULL),
         terms AS (
             SELECT m.id, m.lexical_length, t.lexeme, coalesce(cardinality(t.positions), 1) AS tf
             FROM preselected JOIN public.memories_memory m ON m.id = preselected.id
             CROSS JOIN LATERAL unnest(ts_filter(setweight(m.search_vector, ''A'', $5), ''{{a}}'')) AS t)
         {_SCORED}', tests, counts, once)
        USING {_KEYS},
              query, max_rows, tenant, lexemes, owner_keys, corpus_documents,
              greatest(corpus_terms / corpus_documents, 1), singles, preselect;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0012_lexical_matches_one_index")]

    operations = [migrations.RunSQL(LEXICAL_MATCHES, migration_0012.AFTER)]
