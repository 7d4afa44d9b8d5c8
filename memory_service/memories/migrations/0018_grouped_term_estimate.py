"""A word's bigrams counted as one when ``memory_lexical_matches`` chooses how many of the query's
rarest terms a large scope's matches must hold (migration 0016).

A Japanese word of four characters is three bigrams that every memory holding the word holds
together, so they have the same document count. The independent-terms estimate took them for
three chances and expected few memories to hold "at least m" of the six rarest terms where every
memory with the word held three at once: at 1M the monorepo's Japanese searches chose ``m`` = 2–3
and scored 3,500–6,000 matches (text statement ~50–60 ms against ~20 for English ones). Terms with
the same count are now one group in that estimate: a memory holds all of a group's terms or none.
The tsquery still names the six rarest terms; only the choice of ``m`` changes, and every match is
still scored exactly.
"""

from importlib import import_module

from django.db import migrations

migration_0016 = import_module("memory_service.memories.migrations.0016_bounded_lexical_matches")

_INDEPENDENT = """
        held := array_fill(0::float8, ARRAY[k + 1]);
        held[1] := 1;
        FOR i IN 1..k LOOP
            p := least(counts[i] / corpus_documents, 1);
            FOR j IN REVERSE i + 1..2 LOOP
                held[j] := held[j] * (1 - p) + held[j - 1] * p;
            END LOOP;
            held[1] := held[1] * (1 - p);
        END LOOP;
"""
# held[j + 1]: the chance that a memory holds exactly j of the k rarest terms, a run of terms with
# one count (sorted by count, they are adjacent) held all together or not at all.
_GROUPED = """
        held := array_fill(0::float8, ARRAY[k + 1]);
        held[1] := 1;
        i := 1;
        WHILE i <= k LOOP
            g := 1;
            WHILE i + g <= k AND counts[i + g] = counts[i] LOOP
                g := g + 1;
            END LOOP;
            p := least(counts[i] / corpus_documents, 1);
            FOR j IN REVERSE k + 1..1 LOOP
                held[j] := held[j] * (1 - p) + CASE WHEN j > g THEN held[j - g] * p ELSE 0 END;
            END LOOP;
            i := i + g;
        END LOOP;
"""
_DECLARE = "    m integer;\n"
assert migration_0016.LEXICAL_MATCHES.count(_INDEPENDENT) == 1
assert migration_0016.LEXICAL_MATCHES.count(_DECLARE) == 1
LEXICAL_MATCHES = migration_0016.LEXICAL_MATCHES.replace(_INDEPENDENT, _GROUPED).replace(
    _DECLARE, _DECLARE + "    i integer;\n    g integer;\n"
)


class Migration(migrations.Migration):
    dependencies = [("memories", "0017_memory_owner_expiring")]

    operations = [migrations.RunSQL(LEXICAL_MATCHES, migration_0016.LEXICAL_MATCHES)]
