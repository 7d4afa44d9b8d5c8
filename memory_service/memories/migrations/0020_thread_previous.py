"""A memory's link to the turn before it in a conversation written in one bulk request
(``Memory.thread_previous``; ``services.continues_thread``).

The foreign key is the database's own, ``ON DELETE SET NULL``: whichever path deletes a memory (a
delete, an erasure, retention, a raw statement), the turn after it loses the link in the same
statement, so no link names a memory that is gone. The partial index finds those turns.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0019_lexical_matches_static_sql"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="thread_previous",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="memories.memory",
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                condition=models.Q(("thread_previous__isnull", False)),
                fields=["thread_previous"],
                name="memory_thread_previous",
            ),
        ),
        migrations.RunSQL(
            sql="""ALTER TABLE memories_memory ADD CONSTRAINT memory_thread_previous_fk
                   FOREIGN KEY (thread_previous_id) REFERENCES memories_memory (id)
                   ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED""",
            reverse_sql="ALTER TABLE memories_memory DROP CONSTRAINT memory_thread_previous_fk",
        ),
    ]
