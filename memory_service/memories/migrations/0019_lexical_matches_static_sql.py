"""``memory_lexical_matches`` scores its matches in a statement planned once per connection.

Migration 0016's function built its scoring statement with ``EXECUTE``: PostgreSQL parsed and
planned it anew on every search (~0.6 ms), and the statement unnested each match's filtered
tsvector in a lateral function scan and joined every term to a table of IDFs. The statement is now
written in the function's body, so PL/pgSQL keeps it prepared for the connection and PostgreSQL
reuses a generic plan once that costs no more than the custom ones (200 calls on a small scope:
0.54 ms a call as shipped, 0.35 with ``plan_cache_mode = force_generic_plan``, 1.25 with custom
plans only); each match's terms are unnested in the select list, each term's IDF read from an
array by its position among the query's terms, and the arithmetic is in float8 (it was numeric
in part). Same matches, same
scores: the text statements of 200 searches of the search suite's 10k corpus returned the same
rows in 600 of 600 replays, 5.08 → 4.30 ms on average, alternated with migration 0018's function
(bench/RESULTS.md, "What one search costs, measured again").
"""

from importlib import import_module

from django.db import migrations

migration_0016 = import_module("memory_service.memories.migrations.0016_bounded_lexical_matches")
migration_0018 = import_module("memory_service.memories.migrations.0018_grouped_term_estimate")

K1, B = float(migration_0016.K1), float(migration_0016.B)

_EXECUTED_START = "        EXECUTE\n"
_EXECUTED_END = "        EXIT WHEN m = 1 OR coalesce(cardinality(ids), 0) >= max_rows;\n"
# Every name the statement shares with a variable of the function is qualified or renamed: the
# memory alias (m is the number of rare terms), the output columns (id, rank).
_STATIC = f"""        WITH hits AS MATERIALIZED (
                 SELECT mm.id, mm.lexical_length,
                        unnest(ts_filter(setweight(mm.search_vector, 'A', terms), '{{a}}')) AS term
                 FROM public.memories_memory mm
                 WHERE public.memory_owner_lexeme_tsv(mm.tenant_id, mm.owner_key, mm.search_vector)
                       @@ public.memory_at_least(leaves[1:k], m)::tsquery
                   AND mm.tenant_id IS NOT DISTINCT FROM tenant AND mm.owner_key || '' = ANY(owner_keys)
                 OFFSET 0),
             scored AS (
                 SELECT hits.id AS memory_id,
                        sum(idfs[array_position(terms, (hits.term).lexeme)]
                            * coalesce(cardinality((hits.term).positions), 1) * {K1 + 1}::float8
                            / (coalesce(cardinality((hits.term).positions), 1)
                               + {K1}::float8 * ({1 - B}::float8 + {B}::float8 * hits.lexical_length / average_length))
                        )::real AS score
                 FROM hits
                 GROUP BY hits.id
                 ORDER BY 2 DESC, 1 LIMIT max_rows)
        SELECT array_agg(scored.memory_id ORDER BY scored.score DESC, scored.memory_id),
               array_agg(scored.score ORDER BY scored.score DESC, scored.memory_id)
          INTO ids, ranks FROM scored;
"""
_LOOP = "    LOOP\n" + _EXECUTED_START
_PREPARED = """    idfs := ARRAY(SELECT ln(1 + (corpus_documents - c + 0.5) / (c + 0.5))
                  FROM unnest(counts) WITH ORDINALITY AS u(c, o) ORDER BY u.o);
    average_length := greatest(corpus_terms / corpus_documents, 1);
"""
_DECLARE = "    m integer;\n"

_source = migration_0018.LEXICAL_MATCHES
assert _source.count(_LOOP) == 1 and _source.count(_EXECUTED_END) == 1 and _source.count(_DECLARE) == 1
_start, _end = _source.index(_EXECUTED_START), _source.index(_EXECUTED_END)
LEXICAL_MATCHES = (
    (_source[:_start] + _STATIC + _source[_end:])
    .replace("    LOOP\n" + _STATIC, _PREPARED + "    LOOP\n" + _STATIC)
    .replace(
        _DECLARE,
        _DECLARE + "    idfs float8[];  -- each term's IDF, in the order of terms\n    average_length float8;\n",
    )
)


class Migration(migrations.Migration):
    dependencies = [("memories", "0018_grouped_term_estimate")]

    operations = [migrations.RunSQL(LEXICAL_MATCHES, migration_0018.LEXICAL_MATCHES)]
