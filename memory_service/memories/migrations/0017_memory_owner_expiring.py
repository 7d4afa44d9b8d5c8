"""An index of each scope owner's memories that expire (only sessions' are written with an expiry):
with ``memory_owner_kind_occurred``, whether a search's scope is past the HNSW threshold is read
from indexes alone (``retrieval.candidates._exceeds_sql``) instead of from up to 10,001 rows."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0016_bounded_lexical_matches"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                condition=models.Q(expires_at__isnull=False),
                fields=["tenant", "owner_key"],
                name="memory_owner_expiring",
            ),
        ),
    ]
