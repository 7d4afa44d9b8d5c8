r"""BM25 with k1 0.9 and b 0.4 in the full-text stage, instead of 1.2 and 0.75.

Memories are short (a conversation turn, a lesson of a few lines). Less length normalisation and
an earlier term-frequency saturation ranked them better: on the training halves of
bench/retrieval_quality.py's sets, through the service's search, in two loads, life-chat R@10
0.510 → 0.531 and 0.512 → 0.529, bilingual MRR 0.861 → 0.862; k1 0.6–1.5 with b 0.2–0.5 all within
0.01 of each other, b 0.9 or k1 2.0 worse. Held out: bench/RESULTS.md, "Retrieval quality".
k1 0.9 / b 0.4 are also the constants commonly used for short passages.

The function is migration 0013's with the two constants replaced; nothing else changes.
"""

from importlib import import_module

from django.db import migrations

migration_0013 = import_module("memory_service.memories.migrations.0013_lexical_preselect")

BM25_K1 = 0.9
BM25_B = 0.4


def _with_constants(sql: str, k1: float, b: float) -> str:
    """``sql`` (0013's function) with its BM25 constants replaced, every occurrence accounted for."""
    old_k1, old_b = migration_0013.K1, migration_0013.B
    saturation = (f"({old_k1} + 1)", f"({k1} + 1)")
    length = (f"{old_k1} * (1 - {old_b} + {old_b} *", f"{k1} * (1 - {b} + {b} *")
    for old, _new in (saturation, length):
        if sql.count(old) != 3:
            raise ValueError(f"expected three {old!r} in migration 0013's function")
    replaced = sql.replace(*saturation).replace(*length)
    if str(old_k1) in replaced or str(old_b) in replaced:
        raise ValueError("a BM25 constant of migration 0013 was left in the function")
    return replaced


LEXICAL_MATCHES = _with_constants(migration_0013.LEXICAL_MATCHES, BM25_K1, BM25_B)


class Migration(migrations.Migration):
    dependencies = [("memories", "0014_memory_origin")]

    operations = [migrations.RunSQL(LEXICAL_MATCHES, migration_0013.LEXICAL_MATCHES)]
