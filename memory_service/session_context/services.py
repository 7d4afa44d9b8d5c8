"""Storing and refreshing session-context digests, coalescing bursts of writes.

A write marks the digests it affects dirty in Redis (with the time) and queues at most one refresh
task per digest. The task waits until the writes pause for SESSION_CONTEXT_DEBOUNCE_SECONDS (at
most MAX_WAIT_SECONDS), then renders once under an atomic Redis lock; a write that lands during the
render marks the digest again and queues one more run. So a burst costs one render, two if a write
lands mid-render, and the last write is never missed (a try-lock alone would drop it). If
Redis is down, the write still succeeds; the digest is rendered when next read.
"""

import functools
import logging
import operator
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from audit.services import audit_read_record
from memory_service.exceptions import ValidationError
from memory_service.memories.models import Memory, Scope
from memory_service.redis import get_redis
from memory_service.retrieval.render import digest_memory_ids
from memory_service.session_context.models import SessionContext
from memory_service.session_context.selectors import session_context_render
from tenants.access import Principal, resolve_where
from tenants.context import tenant_context
from tenants.models import Tenant

logger = logging.getLogger(__name__)

LOCK_TIMEOUT_SECONDS = 120
# A digest is rendered at the latest this long after its first unrendered write, even mid-burst.
MAX_WAIT_SECONDS = 30
# A stored digest older than this is re-rendered on read even without a write (time passes:
# lessons expire, sessions end).
MAX_AGE = timedelta(hours=1)


def _key(tenant_id: uuid.UUID | str, user: str, repository: str) -> str:
    return f"memory-service:context:{tenant_id}:{user}:{repository}"


def session_context_store(*, tenant: Tenant, user: str, repository: str) -> SessionContext:
    """Render the digest of (user, repository) and store it; ``generation`` counts the renders."""
    markdown = session_context_render(
        principal=Principal.for_user(tenant=tenant, user=user), user=user, repository=repository
    )
    with tenant_context(tenant.id):
        context, created = SessionContext.objects.get_or_create(
            tenant=tenant, user=user, repository=repository, defaults={"markdown": markdown, "generation": 1}
        )
        if not created:
            SessionContext.objects.filter(pk=context.pk).update(
                markdown=markdown, generated_at=timezone.now(), generation=F("generation") + 1
            )
            context.refresh_from_db()
    return context


def session_context_get(*, tenant: Tenant, user: str, repository: str) -> SessionContext:
    """The stored digest, rendered now if there is none yet or it is older than MAX_AGE."""
    context = SessionContext.objects.for_tenant(tenant).filter(user=user, repository=repository).first()
    if context is None or context.generated_at < timezone.now() - MAX_AGE:
        context = session_context_store(tenant=tenant, user=user, repository=repository)
    return context


def session_context_for(*, principal: Principal, user: str = "", repository: str = "", session: str = "") -> str:
    """The digest a client asked for: stored and kept fresh by the worker for (user, repository);
    rendered live when a session is named (its notes change within a session). The read is
    audited with the ids of the memories the digest lists.

    A 400 naming ``user`` and ``repository`` when the request selects nothing: no user, repository
    or session named, and the token has no user of its own (the digest would be empty).
    """
    where = resolve_where(principal, user=user, repository=repository, session=session)
    if not (where.user or where.repository or where.session):
        raise ValidationError(
            "Name a 'user' or a 'repository' (or a 'session') for the session context: "
            "the token has no user of its own, so there is nothing to show.",
            fields={"user": ["A user or a repository is required."],
                    "repository": ["A user or a repository is required."]},
        )  # fmt: skip
    if where.session:
        markdown = session_context_render(
            principal=principal, user=where.user, repository=where.repository, session=where.session
        )
    else:
        markdown = session_context_get(tenant=principal.tenant, user=where.user, repository=where.repository).markdown
    audit_read_record(principal=principal, resource_type="memory", resource_ids=digest_memory_ids(markdown),
                      details={"view": "session_context"})  # fmt: skip
    return markdown


def affected_digests(memories: list[Memory]) -> list[tuple[str, str]]:
    """(user, repository) of the stored digests that writes to ``memories`` (of one tenant) change,
    in one query."""
    if not memories:
        return []
    owners = []
    for scope, user, repository in {(m.scope, m.user, m.repository) for m in memories}:
        if scope == Scope.USER:
            owners.append(Q(user=user))
        elif scope == Scope.REPOSITORY:
            owners.append(Q(repository=repository))
        else:
            owners.append(Q(user=user, repository=repository))
    stored = SessionContext.objects.for_tenant(memories[0].tenant).filter(functools.reduce(operator.or_, owners))
    return list(stored.values_list("user", "repository").distinct())


def _queue(
    client: redis.Redis, key: str, tenant_id: uuid.UUID | str, user: str, repository: str, countdown: float
) -> bool:
    """Queue one refresh task for the digest unless one is already queued."""
    from memory_service.session_context.tasks import refresh_session_context

    if not client.set(f"{key}:queued", 1, nx=True, ex=MAX_WAIT_SECONDS + 300):
        return False
    refresh_session_context.apply_async(args=[str(tenant_id), user, repository], countdown=countdown, retry=False)
    return True


def request_refresh(*, tenant_id: uuid.UUID | str, user: str, repository: str) -> bool:
    """Note a write to one digest (time of the last write, and of the first unrendered one) and
    queue its refresh unless one is queued. Fails open: without Redis the digest is rendered on read."""
    key = _key(tenant_id, user, repository)
    now = time.time()
    try:
        client = get_redis()
        client.set(f"{key}:dirty", repr(now), ex=3600)
        client.set(f"{key}:since", repr(now), nx=True, ex=3600)
        return _queue(client, key, tenant_id, user, repository, settings.SESSION_CONTEXT_DEBOUNCE_SECONDS)
    except Exception as exc:  # Redis or the broker is down: the write stands regardless
        logger.warning("session context refresh not queued", extra={"error": type(exc).__name__})
        return False


def refresh_after_write(memory: Memory) -> None:
    """After the write commits, refresh every stored digest it affects."""
    refresh_after_writes([memory])


def refresh_after_writes(memories: list[Memory]) -> None:
    """After the writes (to memories of one tenant) commit, refresh every stored digest they affect."""
    if not memories:
        return
    pairs = affected_digests(memories)
    tenant_id = memories[0].tenant_id

    def refresh() -> None:
        for user, repository in pairs:
            request_refresh(tenant_id=tenant_id, user=user, repository=repository)

    if pairs:
        transaction.on_commit(refresh)


def refresh_coalesced(*, tenant_id: str, user: str, repository: str) -> int:
    """Render the digest once the writes to it have paused; returns how many renders this call made.

    While writes keep coming (each within the debounce interval of the last), the task looks again
    later instead of rendering — up to MAX_WAIT_SECONDS after the first unrendered write. The render
    itself runs under an atomic Redis lock; a write that lands during it queues one more run, so the
    last write is always rendered.
    """
    from memory_service.session_context.tasks import refresh_session_context

    key = _key(tenant_id, user, repository)
    client = get_redis()
    last = client.get(f"{key}:dirty")
    if last is None:
        client.delete(f"{key}:queued")
        return 0
    now = time.time()
    since = float(client.get(f"{key}:since") or last)
    quiet_at = float(last) + settings.SESSION_CONTEXT_DEBOUNCE_SECONDS
    if now < quiet_at and now - since < MAX_WAIT_SECONDS:
        refresh_session_context.apply_async(args=[tenant_id, user, repository], countdown=quiet_at - now, retry=False)
        return 0
    client.delete(f"{key}:queued")
    lock = client.lock(f"{key}:lock", timeout=LOCK_TIMEOUT_SECONDS, blocking=False)
    if not lock.acquire(blocking=False):
        return 0  # a render is under way; it queues another run if a write lands meanwhile
    try:
        client.delete(f"{key}:dirty", f"{key}:since")  # writes from here on mark it again
        with tenant_context(tenant_id):
            tenant = Tenant.objects.get(id=tenant_id)
            session_context_store(tenant=tenant, user=user, repository=repository)
    finally:
        try:
            lock.release()
        except redis.exceptions.LockError:
            logger.warning("session context lock expired during a render")
    if client.exists(f"{key}:dirty"):
        _queue(client, key, tenant_id, user, repository, settings.SESSION_CONTEXT_DEBOUNCE_SECONDS)
    return 1


def session_contexts_erase(*, tenant: Tenant, user: str, repositories: Iterable[str]) -> int:
    """Delete the stored digests of ``user`` and of ``repositories`` (they may quote memories that
    were just erased); each is rendered afresh when next read. Returns how many were deleted."""
    stored = SessionContext.objects.for_tenant(tenant).filter(Q(user=user) | Q(repository__in=list(repositories)))
    return stored.delete()[0]
