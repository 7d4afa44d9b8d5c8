"""How each memory was written (``Memory.origin``): a single write, an item of a bulk write, or a
named session note. Rows stored before this migration were not marked: named session notes are
recognised by their name (only they have one); every other row counts as a single write."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0013_lexical_preselect"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="activitylog",
            options={"verbose_name": "activity log entry", "verbose_name_plural": "activity log entries"},
        ),
        migrations.AlterModelOptions(
            name="reviewqueuememory",
            options={"verbose_name": "memory awaiting review", "verbose_name_plural": "memories awaiting review"},
        ),
        migrations.AddField(
            model_name="memory",
            name="origin",
            field=models.CharField(
                choices=[("single", "single write"), ("bulk", "bulk write"), ("session_note", "session note")],
                db_default="single",
                default="single",
                max_length=16,
            ),
        ),
        # Run as the schema's owner (the admin alias, which bypasses row-level security): every tenant.
        migrations.RunSQL(
            "UPDATE memories_memory SET origin = 'session_note' WHERE scope = 'session' AND name <> ''",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
