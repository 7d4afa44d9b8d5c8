r"""Each term's document count kept by the write path; a large scope's matches bounded in the index.

At a million memories, a monorepo's search scope holds 130,000 of them, and a query of everyday
words ("lessons about rate limit errors") finds 20,000–100,000 of them. Until now every match was
read from the heap to count each term's documents (the IDFs) and to score it, ~1 µs a row:
the full-text statement alone took 96 ms at the median and 210 ms at p95 there. Now:

- ``OwnerLexemeStats``: how many of a scope owner's memories hold each lexeme, kept by
  statement-level triggers on the memory table like ``OwnerLexicalStats`` (migration 0010), so the
  IDFs are read, not counted: exact, whoever writes. A statement locks their rows in (tenant,
  owner, lexeme) order, and only once it holds the owners' ``OwnerLexicalStats`` rows, so writers
  of one owner wait for each other there (as they did before) and never deadlock on lexeme rows
  across the several statements of a bulk request (``_LOCK_OWNERS``).
- The GIN index keys each memory by ``memory_owner_lexeme_tsv``: the same (tenant, owner, lexeme)
  hashes as migration 0009's, as the lexemes of a tsvector instead of an array, so that a tsquery
  over them — any boolean combination of terms — is answered inside the index.
- ``memory_lexical_matches``: in a scope of more than ``BOUNDED_MIN_DOCUMENTS`` memories, asked for
  its best ``max_rows``, it reads only the memories that hold at least ``m`` of the query's
  ``BOUNDED_TERMS`` rarest terms, ``m`` the largest for which about ``BOUNDED_TARGET`` memories are
  expected to (the geometric mean of two estimates from the counts: terms independent, which
  undercounts words that come together — "rate limit", a Japanese word's bigrams — and terms
  nested, which overcounts); with fewer than ``max_rows`` such memories it asks again with ``m - 1``.
  Those memories are scored exactly. A memory holding fewer of the rare terms can be missed even
  where it would score higher (a common term repeated). Smaller scopes, a call without
  ``max_rows`` (the scan of all matches) and ``m = 1`` over all terms read every match, exactly as
  before. Tests and the benchmark may set ``memory.lexical_bounded`` (an integer): the bounded path
  with that target, in a scope of any size.

At 1M (bench/perf_search.py's corpus), the full-text statements of 200 searches replayed alternately
with migration 0015's function, against the exact ranking (every match scored): monorepo p50
95 → 21 ms, p95 210 → 62 ms, top-10 and top-50 identical to the exact ones in 30 of 30 (0015's
preselection: 0.99 / 0.994); the other tenant classes unchanged (bench/RESULTS.md).

This replaces migration 0013's preselection (every match read, the best once-each scored exactly).
The backfill counts every memory's lexemes (as the schema's owner, every tenant); at a million
memories, expect minutes for it and the index.
"""

from importlib import import_module

import django.db.models.deletion
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import migrations, models
from django.db.models import F, Func

import tenants.rls

migration_0015 = import_module("memory_service.memories.migrations.0015_bm25_short_documents")

K1, B = migration_0015.BM25_K1, migration_0015.BM25_B
BOUNDED_MIN_DOCUMENTS = 50_000
BOUNDED_TARGET = 400
BOUNDED_TERMS = 6

OWNER_LEXEME_TSV = """
CREATE FUNCTION memory_owner_lexeme_tsv(tenant uuid, owner_key text, lexemes tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY(SELECT DISTINCT to_hex(public.memory_lexeme_key(tenant, owner_key, lexeme))
                                   FROM unnest(tsvector_to_array(lexemes)) AS lexeme))
$$;
"""

# "At least m of these": leaves are tsquery texts; the result has about C(k, m) conjunctions.
AT_LEAST = """
CREATE FUNCTION memory_at_least(leaves text[], m integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    k integer := cardinality(leaves);
BEGIN
    IF m < 1 OR m > k THEN
        RAISE EXCEPTION 'memory_at_least: % of % terms', m, k;
    END IF;
    IF m = 1 THEN
        RETURN '(' || array_to_string(leaves, ' | ') || ')';
    END IF;
    IF m = k THEN
        RETURN '(' || array_to_string(leaves, ' & ') || ')';
    END IF;
    RETURN '((' || leaves[1] || ' & ' || public.memory_at_least(leaves[2:k], m - 1) || ') | '
           || public.memory_at_least(leaves[2:k], m) || ')';
END $$;
"""

# The rows whose lexemes count: all that a statement inserted or deleted; of those it updated, the
# ones whose document, owner or tenant changed (a status update counts nothing).
_CHANGED = (
    "SELECT {side}.tenant_id, {side}.owner_key, {side}.search_vector FROM new_rows n JOIN old_rows o ON o.id = n.id"
    " WHERE (n.tenant_id, n.owner_key, n.search_vector) IS DISTINCT FROM (o.tenant_id, o.owner_key, o.search_vector)"
)
# +1 or -1 for each lexeme of each of ``rows``.
_LEXEMES = (
    "SELECT r.tenant_id, r.owner_key, l.lexeme, {sign} AS change"
    " FROM ({rows}) r CROSS JOIN LATERAL unnest(tsvector_to_array(r.search_vector)) AS l(lexeme)"
)
_INSERTED = _LEXEMES.format(sign=1, rows="SELECT * FROM new_rows")
_DELETED = _LEXEMES.format(sign=-1, rows="SELECT * FROM old_rows")
_UPDATED_NEW = _LEXEMES.format(sign=1, rows=_CHANGED.format(side="n"))
_UPDATED_OLD = _LEXEMES.format(sign=-1, rows=_CHANGED.format(side="o"))
_APPLY = """
        INSERT INTO memories_ownerlexemestats AS s (tenant_id, owner_key, lexeme, documents)
        SELECT tenant_id, owner_key, lexeme, sum(change) FROM ({changes}) change
        GROUP BY tenant_id, owner_key, lexeme HAVING sum(change) <> 0
        ORDER BY tenant_id, owner_key, lexeme
        ON CONFLICT (tenant_id, owner_key, lexeme) DO UPDATE SET documents = s.documents + excluded.documents;"""
# Only the counts a statement lowered can have reached zero.
_DROP_ZEROS = """
        DELETE FROM memories_ownerlexemestats s
        USING (SELECT DISTINCT tenant_id, owner_key, lexeme FROM ({lowered}) lowered) lowered
        WHERE s.tenant_id = lowered.tenant_id AND s.owner_key = lowered.owner_key AND s.lexeme = lowered.lexeme
          AND s.documents <= 0;"""

# Writers of one owner must wait for each other on its OwnerLexicalStats row, taken before any of
# its lexeme rows: a bulk request stores its parts in several statements of one transaction, and two
# of them locking lexeme rows statement by statement would deadlock. The triggers fire in name
# order, so migration 0010's ("memory_lexical_stats_…") upserts the owner rows first; an edit that
# leaves a memory's length unchanged skips them there, so they are locked here too.
_LOCK_OWNERS = f"""
        PERFORM 1 FROM memories_ownerlexicalstats s
        WHERE (s.tenant_id, s.owner_key) IN (
            SELECT tenant_id, owner_key FROM ({_CHANGED.format(side="n")}) changed_new
            UNION SELECT tenant_id, owner_key FROM ({_CHANGED.format(side="o")}) changed_old)
        ORDER BY s.tenant_id, s.owner_key FOR UPDATE;"""

_UPDATED = (
    _LOCK_OWNERS
    + _APPLY.format(changes=f"{_UPDATED_NEW} UNION ALL {_UPDATED_OLD}")
    + _DROP_ZEROS.format(lowered=_UPDATED_OLD)
)

STATS_TRIGGER = f"""
CREATE FUNCTION memory_lexeme_stats_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN{_APPLY.format(changes=_INSERTED)}
    ELSIF TG_OP = 'UPDATE' THEN{_UPDATED}
    ELSE{_APPLY.format(changes=_DELETED)}{_DROP_ZEROS.format(lowered=_DELETED)}
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_lexical_terms_insert AFTER INSERT ON memories_memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_lexeme_stats_apply();
CREATE TRIGGER memory_lexical_terms_update AFTER UPDATE ON memories_memory
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_lexeme_stats_apply();
CREATE TRIGGER memory_lexical_terms_delete AFTER DELETE ON memories_memory
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_lexeme_stats_apply();
"""
DROP_STATS_TRIGGER = """
DROP TRIGGER IF EXISTS memory_lexical_terms_insert ON memories_memory;
DROP TRIGGER IF EXISTS memory_lexical_terms_update ON memories_memory;
DROP TRIGGER IF EXISTS memory_lexical_terms_delete ON memories_memory;
DROP FUNCTION IF EXISTS memory_lexeme_stats_apply();
"""

# The migration runs as the schema's owner (BYPASSRLS): every tenant's owners are counted.
STATS_BACKFILL = """
INSERT INTO memories_ownerlexemestats (tenant_id, owner_key, lexeme, documents)
SELECT m.tenant_id, m.owner_key, l.lexeme, count(*)
FROM memories_memory m CROSS JOIN LATERAL unnest(tsvector_to_array(m.search_vector)) AS l(lexeme)
GROUP BY m.tenant_id, m.owner_key, l.lexeme
"""

LEXICAL_MATCHES = f"""
CREATE OR REPLACE FUNCTION memory_lexical_matches(owner_keys text[], query tsquery, max_rows integer)
RETURNS TABLE (id uuid, rank real, ideal real)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
-- The planner cannot estimate a match of computed keys and would plan parallel workers for a few
-- hundred rows.
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    tenant uuid := public.app_current_tenant();
    corpus_documents float8;
    corpus_terms float8;
    terms text[];  -- the query's distinct lexemes that the owners' memories hold, rarest first
    counts float8[];  -- how many of the owners' memories hold each
    leaves text[];  -- each term as a tsquery: its key under each owner, or'ed
    target integer;
    k integer;
    m integer;
    held float8[];  -- held[j + 1]: the chance that a memory holds exactly j of the k rarest terms
    p float8;
    expected float8;
    ids uuid[];
    ranks real[];
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    SELECT sum(s.documents), sum(s.terms) INTO corpus_documents, corpus_terms
    FROM public.memories_ownerlexicalstats s WHERE s.tenant_id = tenant AND s.owner_key = ANY(owner_keys);
    IF coalesce(corpus_documents, 0) <= 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(l.lexeme ORDER BY c.n, l.lexeme), array_agg(c.n ORDER BY c.n, l.lexeme) INTO terms, counts
    FROM (SELECT DISTINCT q AS lexeme FROM unnest(public.memory_query_lexemes(query)) AS q) l
    CROSS JOIN LATERAL (SELECT sum(s.documents)::float8 AS n FROM public.memories_ownerlexemestats s
                        WHERE s.tenant_id = tenant AND s.owner_key = ANY(owner_keys) AND s.lexeme = l.lexeme) c
    WHERE c.n > 0;
    IF terms IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg('(' || (SELECT string_agg(quote_literal(to_hex(public.memory_lexeme_key(tenant, o, t.lexeme))), ' | ')
                             FROM unnest(owner_keys) AS o) || ')' ORDER BY t.i)
      INTO leaves FROM unnest(terms) WITH ORDINALITY AS t(lexeme, i);

    target := nullif(current_setting('memory.lexical_bounded', true), '')::integer;
    IF target IS NULL AND corpus_documents > {BOUNDED_MIN_DOCUMENTS} THEN
        target := {BOUNDED_TARGET};
    END IF;
    k := cardinality(terms);
    m := 1;
    IF max_rows IS NOT NULL AND target IS NOT NULL THEN
        k := least(k, {BOUNDED_TERMS});
        held := array_fill(0::float8, ARRAY[k + 1]);
        held[1] := 1;
        FOR i IN 1..k LOOP
            p := least(counts[i] / corpus_documents, 1);
            FOR j IN REVERSE i + 1..2 LOOP
                held[j] := held[j] * (1 - p) + held[j - 1] * p;
            END LOOP;
            held[1] := held[1] * (1 - p);
        END LOOP;
        m := k;
        LOOP
            -- Independent terms: corpus · P(at least m); nested ones: the m-th largest count.
            SELECT sqrt(greatest(sum(held[j]) * corpus_documents, 1)
                        * (SELECT c FROM unnest(counts[1:k]) AS c ORDER BY c DESC OFFSET m - 1 LIMIT 1))
              INTO expected FROM generate_series(m + 1, k + 1) AS j;
            EXIT WHEN expected >= target OR m = 1;
            m := m - 1;
        END LOOP;
    END IF;
    -- The tenant and owner of each row are checked as filters (a hash collision only adds rows,
    -- and a row's own lexemes score it); the owner check is an expression no index answers, so
    -- the rows the keys found are not intersected with another index.
    LOOP
        EXECUTE
            'WITH hits AS MATERIALIZED (
                 SELECT m.id, m.lexical_length, ts_filter(setweight(m.search_vector, ''A'', $2), ''{{a}}'') AS found
                 FROM public.memories_memory m
                 WHERE public.memory_owner_lexeme_tsv(m.tenant_id, m.owner_key, m.search_vector) @@ $1
                   AND m.tenant_id IS NOT DISTINCT FROM $3 AND m.owner_key || '''' = ANY($4)
                 OFFSET 0),
             frequency AS (
                 SELECT f.lexeme, ln(1 + ($5 - f.n + 0.5) / (f.n + 0.5)) AS idf FROM unnest($2, $6) AS f(lexeme, n)),
             scored AS (
                 SELECT hits.id,
                        sum(frequency.idf * coalesce(cardinality(t.positions), 1) * ({K1} + 1)
                            / (coalesce(cardinality(t.positions), 1)
                               + {K1} * (1 - {B} + {B} * hits.lexical_length / $7)))::real AS rank
                 FROM hits CROSS JOIN LATERAL unnest(hits.found) AS t JOIN frequency ON frequency.lexeme = t.lexeme
                 GROUP BY hits.id
                 ORDER BY rank DESC, hits.id LIMIT $8)
             SELECT array_agg(scored.id ORDER BY scored.rank DESC, scored.id),
                    array_agg(scored.rank ORDER BY scored.rank DESC, scored.id)
             FROM scored'
          INTO ids, ranks
          USING public.memory_at_least(leaves[1:k], m)::tsquery, terms, tenant, owner_keys, corpus_documents,
                counts, greatest(corpus_terms / corpus_documents, 1), max_rows;
        EXIT WHEN m = 1 OR coalesce(cardinality(ids), 0) >= max_rows;
        m := m - 1;
    END LOOP;
    -- ideal: the score of an average-length memory holding each term once (the sum of the IDFs).
    RETURN QUERY
        SELECT u.id, u.rank,
               (SELECT sum(ln(1 + (corpus_documents - c + 0.5) / (c + 0.5))) FROM unnest(counts) AS c)::real
        FROM unnest(ids, ranks) WITH ORDINALITY AS u(id, rank, o)
        ORDER BY u.o;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0015_bm25_short_documents")]

    operations = [
        migrations.CreateModel(
            name="OwnerLexemeStats",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "tenant_id",
                        "owner_key",
                        "lexeme",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("owner_key", models.CharField(max_length=160)),
                ("lexeme", models.TextField()),
                ("documents", models.BigIntegerField()),
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
        tenants.rls.EnableTenantRLS("ownerlexemestats"),
        migrations.RunSQL(STATS_TRIGGER, DROP_STATS_TRIGGER),
        migrations.RunSQL(STATS_BACKFILL, migrations.RunSQL.noop),
        migrations.RunSQL(OWNER_LEXEME_TSV, "DROP FUNCTION IF EXISTS memory_owner_lexeme_tsv(uuid, text, tsvector)"),
        migrations.RunSQL(AT_LEAST, "DROP FUNCTION IF EXISTS memory_at_least(text[], integer)"),
        migrations.AddIndex(
            model_name="memory",
            index=GinIndex(
                Func(
                    F("tenant"),
                    F("owner_key"),
                    F("search_vector"),
                    function="memory_owner_lexeme_tsv",
                    output_field=SearchVectorField(),
                ),
                name="memory_owner_lexemes",
                fastupdate=False,
            ),
        ),
        migrations.RunSQL(LEXICAL_MATCHES, migration_0015.LEXICAL_MATCHES),
        migrations.RemoveIndex(model_name="memory", name="memory_owner_lexeme_hashes"),
    ]
