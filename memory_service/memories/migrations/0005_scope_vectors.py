"""Scope owner keys and scope vectors (models.Memory.owner_key, models.ScopeVector).

``owner_key`` is a stored generated column (the table is rewritten once). The database keeps
``ScopeVector``: a trigger inserts a row with every MemoryEmbedding (as halfvec, for models of up
to 1024 dimensions, models.SCOPE_VECTOR_MAX_DIMENSION) and a composite foreign key deletes it with
its embedding, whoever writes (the service, ``reindex_embeddings``, bulk loads). Existing vectors
are copied before the covering index is built.
"""

import django.db.models.deletion
import django.db.models.functions.text
import pgvector.django.halfvec
from django.db import migrations, models

import tenants.rls

SCOPE_VECTOR_TRIGGER = """
CREATE FUNCTION memory_scope_vector_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF vector_dims(NEW.embedding) <= 1024 THEN
        INSERT INTO memories_scopevector (memory_id, model, tenant_id, owner_key, embedding)
        SELECT NEW.memory_id, NEW.model, NEW.tenant_id, m.owner_key, NEW.embedding::halfvec
        FROM memories_memory m WHERE m.id = NEW.memory_id
        ON CONFLICT (memory_id, model) DO UPDATE SET embedding = EXCLUDED.embedding;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_embedding_scope_vector
    AFTER INSERT OR UPDATE OF embedding ON memories_memoryembedding
    FOR EACH ROW EXECUTE FUNCTION memory_scope_vector_write();
"""

BACKFILL = """
INSERT INTO memories_scopevector (memory_id, model, tenant_id, owner_key, embedding)
SELECT e.memory_id, e.model, e.tenant_id, m.owner_key, e.embedding::halfvec
FROM memories_memoryembedding e JOIN memories_memory m ON m.id = e.memory_id
WHERE vector_dims(e.embedding) <= 1024
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0004_pending_embedding_index"),
        ("tenants", "0002_tenant_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="owner_key",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.db.models.functions.text.Concat(
                    "scope",
                    models.Value(":"),
                    models.Case(
                        models.When(scope="user", then="user"),
                        models.When(scope="repository", then="repository"),
                        default="session",
                    ),
                ),
                output_field=models.CharField(max_length=160),
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                fields=["tenant", "owner_key", "kind", "-occurred_at", "-created_at"], name="memory_owner_kind_occurred"
            ),
        ),
        migrations.CreateModel(
            name="ScopeVector",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "memory_id", "model", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("model", models.CharField(max_length=64)),
                ("owner_key", models.CharField(max_length=160)),
                ("embedding", pgvector.django.halfvec.HalfVectorField()),
                (
                    "memory",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memories.memory",
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="tenants.tenant"
                    ),
                ),
            ],
        ),
        tenants.rls.EnableTenantRLS("scopevector"),
        migrations.RunSQL(
            "ALTER TABLE memories_scopevector ADD CONSTRAINT scope_vector_embedding_fk "
            "FOREIGN KEY (memory_id, model) REFERENCES memories_memoryembedding (memory_id, model) ON DELETE CASCADE",
            migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            SCOPE_VECTOR_TRIGGER,
            "DROP TRIGGER IF EXISTS memory_embedding_scope_vector ON memories_memoryembedding;"
            "DROP FUNCTION IF EXISTS memory_scope_vector_write()",
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="scopevector",
            index=models.Index(
                fields=["tenant", "model", "owner_key"], include=("memory", "embedding"), name="scope_vector_owner"
            ),
        ),
    ]
