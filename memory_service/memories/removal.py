"""Bulk removals of memory data: one user's erasure, and the retention purges.

These delete rows for good, without per-memory audit events: the caller records one ``erase`` or
``purge`` event with the counts. Run inside the tenant's transaction.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from audit.services import user_pseudonym
from memory_service.memories.models import ActivityLog, Memory, MemoryEmbedding, Scope, Supersession
from tenants.models import Tenant


@dataclass(frozen=True)
class RemovedMemories:
    memories: int
    embeddings: int
    supersessions: int
    repositories: frozenset[str]

    def counts(self) -> dict[str, int]:
        return {"memories": self.memories, "embeddings": self.embeddings, "supersessions": self.supersessions}


def _remove(*, tenant: Tenant, memories) -> RemovedMemories:
    # Lock the rows first (in id order, as every locker of several memories should). An embedder
    # writing one of their vectors holds its row: we wait for it to commit, then count and delete
    # that vector too, instead of leaving it to fail the foreign key at commit. Embedders skip
    # rows we hold. Only the rows locked here are removed.
    locked = list(memories.order_by("id").select_for_update(of=("self",)).values_list("id", flat=True))
    memories = Memory.objects.for_tenant(tenant).filter(id__in=locked)
    ids = memories.values("id")
    embeddings = MemoryEmbedding.objects.for_tenant(tenant).filter(memory__in=ids).count()
    supersessions = Supersession.objects.for_tenant(tenant).filter(Q(old__in=ids) | Q(new__in=ids)).count()
    repositories = frozenset(memories.exclude(repository="").values_list("repository", flat=True).distinct())
    # Vectors and supersession links go with their memories (ON DELETE CASCADE in the ORM).
    deleted = memories.delete()[1].get(Memory._meta.label, 0)
    return RemovedMemories(deleted, embeddings, supersessions, repositories)


def user_memories_erase(*, tenant: Tenant, user: str) -> RemovedMemories:
    """Delete every memory ``user`` wrote or owns, in every scope, with their vectors and links."""
    return _remove(tenant=tenant, memories=Memory.objects.for_tenant(tenant).filter(Q(user=user) | Q(author=user)))


def user_activity_erase(*, tenant: Tenant, user: str) -> int:
    """Delete the activity rows (searches and writes) of ``user``, recorded under its pseudonym."""
    pseudonym = user_pseudonym(user)
    return ActivityLog.objects.for_tenant(tenant).filter(user=pseudonym).delete()[0]


def expired_session_memories_purge(*, tenant: Tenant, now: datetime) -> RemovedMemories:
    """Delete the session memories whose expiry has passed."""
    expired = Memory.objects.for_tenant(tenant).filter(scope=Scope.SESSION, expires_at__lte=now)
    return _remove(tenant=tenant, memories=expired)


def activity_purge(*, tenant: Tenant, before: datetime) -> int:
    """Delete the activity rows older than ``before``."""
    return ActivityLog.objects.for_tenant(tenant).filter(at__lt=before).delete()[0]
