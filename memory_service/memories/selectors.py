"""Every read of memories goes through these functions; each starts from ``for_tenant``."""

import uuid
from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models import QuerySet

from audit.services import audit_read_record
from memory_service.exceptions import NotFoundError, ValidationError
from memory_service.memories.models import ActivityLog, Memory, Scope, Supersession
from memory_service.memories.status import DerivedStatus, Replacement, derive_status
from tenants.access import (
    Principal,
    check_repository,
    check_scope,
    check_session,
    check_user,
    memory_visibility,
    require_unbound,
)
from tenants.identifiers import validate_identifier

#: How many links deep ``memory_successors`` follows a chain of replacements.
MAX_CHAIN = 50


def memory_list(*, principal: Principal, filters: dict) -> QuerySet[Memory]:
    """Memories the token may read, newest first, narrowed by ``filters``.

    ``filters`` may hold scope, kind, user, repository, session, confidence, priority, tag.
    """
    check_user(principal, filters.get("user"))
    check_repository(principal, filters.get("repository"))
    check_session(principal, filters.get("session"))
    check_scope(principal, filters.get("scope"))
    queryset = Memory.objects.for_tenant(principal.tenant).filter(memory_visibility(principal))
    for name in ("scope", "kind", "user", "repository", "session", "confidence", "priority"):
        if filters.get(name):
            queryset = queryset.filter(**{name: filters[name]})
    if filters.get("tag"):
        queryset = queryset.filter(tags__contains=[filters["tag"]])
    return queryset.order_by("-created_at", "-id")


def parse_memory_id(value: str, *, field: str = "id") -> uuid.UUID:
    """A memory id from a path or body; ValidationError naming ``field`` when malformed."""
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise ValidationError(f"'{field}' is not a valid memory id.", fields={field: ["Not a UUID."]}) from exc


def memory_get(*, principal: Principal, memory_id: uuid.UUID | str) -> Memory:
    """The memory if the token may read it; NotFoundError if missing, another tenant's or hidden."""
    memory = (
        Memory.objects.for_tenant(principal.tenant)
        .filter(memory_visibility(principal), id=parse_memory_id(str(memory_id)))
        .first()
    )
    if memory is None:
        raise NotFoundError("No such memory.")
    return memory


def memory_read(*, principal: Principal, memory_id: uuid.UUID | str) -> Memory:
    """``memory_get`` for a client that is handed the memory: the read is audited."""
    memory = memory_get(principal=principal, memory_id=memory_id)
    audit_read_record(principal=principal, resource_type="memory", resource_ids=[memory.id])
    return memory


# The supersession links of memory ``m`` (a memory row's alias), oldest first, as two arrays: the
# replacements' ids and whether each replaces it in part. For a statement that reads memories
# and needs their statuses: ``FROM memories_memory m LEFT JOIN LATERAL (<this>) links ON true``.
SUPERSESSION_LINKS_LATERAL = f"""SELECT array_agg(s.new_id ORDER BY s.created_at, s.id) AS new_ids,
                  array_agg(s.partial ORDER BY s.created_at, s.id) AS partials
           FROM {Supersession._meta.db_table} s WHERE s.tenant_id = m.tenant_id AND s.old_id = m.id"""


def memory_successors(*, principal: Principal, memory_ids: Iterable) -> dict[str, set[str]]:
    """Memory id → the ids of every memory that replaces it (wholly or in part), directly or through
    a chain of replacements (A replaced by B, B by C: A → {B, C}), within the principal's tenant.
    A chain is followed at most ``MAX_CHAIN`` links deep, which also ends links that loop. Only ids
    come back: the memories themselves are read, if at all, through the other selectors."""
    ids = [str(memory_id) for memory_id in memory_ids]
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH RECURSIVE chain(start_id, new_id, depth) AS (
                    SELECT old_id, new_id, 1 FROM {Supersession._meta.db_table}
                    WHERE tenant_id = %s AND old_id = ANY(%s::uuid[])
                    UNION
                    SELECT chain.start_id, s.new_id, chain.depth + 1
                    FROM chain JOIN {Supersession._meta.db_table} s ON s.old_id = chain.new_id AND s.tenant_id = %s
                    WHERE chain.depth < %s AND s.new_id <> chain.start_id)
                SELECT DISTINCT start_id, new_id FROM chain""",
            [principal.tenant.id, ids, principal.tenant.id, MAX_CHAIN],
        )
        successors: dict[str, set[str]] = defaultdict(set)
        for start_id, new_id in cursor.fetchall():
            successors[str(start_id)].add(str(new_id))
    return dict(successors)


def memory_statuses(
    *, principal: Principal, memories: Iterable[Memory], links: dict[uuid.UUID, list[tuple]] | None = None
) -> dict[uuid.UUID, DerivedStatus]:
    """Derived status of each memory, in one query (two when some are superseded); replacement
    titles only where the token may read the replacement.

    ``links``: memory id → its (replacement id, partial) links oldest first, every memory's entry
    (empty when none), when the caller read them with the memories (``SUPERSESSION_LINKS_LATERAL``):
    then only the replacements' titles are read, and only if there are any.
    """
    memories = list(memories)
    if not memories:
        return {}
    if links is None:
        links = defaultdict(list)
        # Written out: this runs on every read of memories, and the ORM's compilation cost more than the query.
        with connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT old_id, new_id, partial FROM {Supersession._meta.db_table}
                    WHERE tenant_id = %s AND old_id = ANY(%s) ORDER BY created_at, id""",
                [principal.tenant.id, [m.id for m in memories]],
            )
            for old_id, new_id, partial in cursor.fetchall():
                links[old_id].append((new_id, partial))
    new_ids = {new_id for memory in memories for new_id, _partial in links.get(memory.id, ())}
    readable = {}
    if new_ids:
        readable = dict(
            Memory.objects.for_tenant(principal.tenant)
            .filter(memory_visibility(principal), id__in=new_ids)
            .values_list("id", "title")
        )
    statuses = {}
    for memory in memories:
        replacements = [
            Replacement(id=str(new_id), title=readable.get(new_id), partial=partial)
            for new_id, partial in links.get(memory.id, ())
        ]
        statuses[memory.id] = derive_status(lifecycle=memory.lifecycle, replacements=replacements)
    return statuses


def decision_list(*, principal: Principal, repository: str) -> QuerySet[Memory]:
    """Every decision of ``repository`` the token may read, newest first (the decision index).
    A repository that is not an identifier free of personal data is refused (400)."""
    validate_identifier(repository, field="repository")
    check_repository(principal, repository)
    return (
        Memory.objects.for_tenant(principal.tenant)
        .filter(memory_visibility(principal), scope=Scope.REPOSITORY, repository=repository, kind="decision")
        .order_by("-created_at", "-id")
    )


def decision_index(*, principal: Principal, repository: str, limit: int) -> tuple[list[Memory], bool]:
    """The newest ``limit`` decisions of ``decision_list`` and whether there are more; the read is
    audited (the decisions' ids)."""
    decisions = list(decision_list(principal=principal, repository=repository)[: limit + 1])
    shown = decisions[:limit]
    audit_read_record(principal=principal, resource_type="memory", resource_ids=[d.id for d in shown],
                      details={"list": True})  # fmt: skip
    return shown, len(decisions) > limit


def activity_list(*, principal: Principal, filters: dict) -> QuerySet[ActivityLog]:
    """The tenant's search and write activity, newest first (search analytics).

    Activity spans every user and repository: a bound principal is refused (403)."""
    require_unbound(principal, "Activity")
    rows = ActivityLog.objects.for_tenant(principal.tenant)
    if filters.get("operation"):
        rows = rows.filter(operation=filters["operation"])
    if filters.get("client"):
        rows = rows.filter(client=filters["client"])
    if filters.get("since"):
        rows = rows.filter(at__gte=filters["since"])
    if filters.get("until"):
        rows = rows.filter(at__lt=filters["until"])
    if filters.get("zero_hits"):
        rows = rows.filter(operation=ActivityLog.Operation.SEARCH, hit_count=0)
    return rows.order_by("-at", "-id")
