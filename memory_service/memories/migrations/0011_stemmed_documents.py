"""Rebuild every stored full-text document with English stems (``retrieval.lexical``).

Documents and queries must be built the same way: queries are stemmed from now on, so each
memory's ``search_vector`` is rebuilt from its title, text, tags and date, in batches of 2,000 (as
the schema's owner, every tenant), with a progress line every 50,000. The statement triggers of
migration 0010 keep each owner's term counts. At a million memories, expect minutes: every row
and its GIN keys are rewritten.
"""

import sys

from django.db import migrations

BATCH = 2000
REPORT_EVERY = 50_000


def rebuild_documents(apps, schema_editor):
    from memory_service.retrieval.lexical import lexical_document

    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories_memory")
        total = cursor.fetchone()[0]
    done, last_id = 0, None
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, title, text, tags, occurred_at FROM memories_memory"
                " WHERE (%s::uuid IS NULL OR id > %s::uuid) ORDER BY id LIMIT %s",
                [last_id, last_id, BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                break
            ids = [row[0] for row in rows]
            documents = [
                lexical_document(title=title, text=text, tags=tags, occurred_at=occurred_at)
                for _id, title, text, tags, occurred_at in rows
            ]
            cursor.execute(
                """UPDATE memories_memory m SET search_vector = to_tsvector('simple', rebuilt.document)
                   FROM unnest(%s::uuid[], %s::text[]) AS rebuilt(id, document) WHERE m.id = rebuilt.id""",
                [ids, documents],
            )
        done += len(rows)
        last_id = ids[-1]
        if total > REPORT_EVERY and (done // REPORT_EVERY) != ((done - len(rows)) // REPORT_EVERY):
            print(f"  rebuilt {done:,} of {total:,} full-text documents", file=sys.stderr, flush=True)


class Migration(migrations.Migration):
    dependencies = [("memories", "0010_bm25")]

    operations = [migrations.RunPython(rebuild_documents, migrations.RunPython.noop)]
