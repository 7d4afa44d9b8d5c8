"""Drop every stored digest: those rendered before annotations escaped the replacements' titles
may carry a forged line. Each is rendered afresh, through ``retrieval.render``, when next read."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("session_context", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL("DELETE FROM session_context_sessioncontext", reverse_sql=migrations.RunSQL.noop),
    ]
