"""The full-text stage reads one index: the owner-lexeme keys (migration 0009).

Its statement also filtered on ``owner_key = ANY(...)``, and the planner answered that filter from
``memory_owner_kind_occurred`` too, ANDing a bitmap of every memory of the scope owners with the
bitmap of the matches (every memory of a monorepo's scope, for each search). The keys already
name the owner, so the filter is only a check (a hash collision only adds rows): written
``owner_key || '' = ANY(...)``, no index answers it. The same rows, sooner (bench/RESULTS.md,
"Search at 1M with a monorepo").
"""

from importlib import import_module

from django.db import migrations

migration_0010 = import_module("memory_service.memories.migrations.0010_bm25")

_CREATE = "CREATE FUNCTION memory_lexical_matches("
_OWNER_FILTER = "AND m.tenant_id IS NOT DISTINCT FROM $4 AND m.owner_key = ANY($6)"
_OWNER_CHECK = "AND m.tenant_id IS NOT DISTINCT FROM $4 AND m.owner_key || '''' = ANY($6)"

BEFORE = migration_0010.LEXICAL_MATCHES.replace(_CREATE, "CREATE OR REPLACE FUNCTION memory_lexical_matches(")
AFTER = BEFORE.replace(_OWNER_FILTER, _OWNER_CHECK).replace(
    "OFFSET 0 keeps the rows found by the keys from\n    -- being intersected with another index.",
    "The owner check is an expression no index answers,\n    -- so the rows found by the keys are not intersected with another index.",
)


class Migration(migrations.Migration):
    dependencies = [("memories", "0011_stemmed_documents")]

    operations = [migrations.RunSQL(AFTER, BEFORE)]
