"""Every write to memories goes through these functions (README, "Memories and search").

validate → mask every free-text field → store → audit → commit → enqueue the embedding (ids only).
The raw text lives only in the request's memory: what is stored, queued, logged or audited is
masked or is an id.
"""

import functools
import hashlib
import hmac
import itertools
import json
import logging
import operator
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchVector
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Q, TextField, Value
from django.utils import timezone

from audit.models import Action
from audit.services import EventSpec, audit_event_record, audit_events_record, user_pseudonym
from memory_service.exceptions import (
    ApplicationError,
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    ValidationError,
)
from memory_service.inputs import check_storable
from memory_service.memories.models import (
    ActivityLog,
    Confidence,
    EmbeddingStatus,
    Kind,
    Lifecycle,
    Memory,
    Origin,
    Priority,
    Scope,
    Supersession,
    owner_key,
)
from memory_service.memories.selectors import memory_get
from memory_service.retrieval.lexical import lexical_document
from memory_service.session_context.services import refresh_after_write, refresh_after_writes
from tenants.access import Principal, check_scope, check_supersede, require_permission, resolve_where
from tenants.context import tenant_context
from tenants.identifiers import validate_identifier, validate_metadata_keys
from tenants.masking import mask_fields, masker_version, masking_parts
from tenants.models import Permission, Tenant
from tenants.services import actor_of

logger = logging.getLogger(__name__)

# Limits (documented in the README and the OpenAPI schema).
MAX_TEXT_BYTES = 16 * 1024  # after masking
# Raw text above this is refused before the masker sees it (what is stored is MAX_TEXT_BYTES at most).
MAX_RAW_TEXT_CHARS = 65_536
MAX_TITLE_CHARS = 512
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_METADATA_BYTES = 4 * 1024
MAX_SOLVED_QUERY_CHARS = 2000
MASKED_FIELDS = ("text", "title", "tags", "metadata", "solved_query")


@dataclass
class MemoryWriteResult:
    """The stored memory; ``created`` is False for an idempotent repeat or an exact duplicate."""

    memory: Memory
    created: bool
    pii: dict[str, int] = field(default_factory=dict)


def _tenant_hmac(principal: Principal, purpose: str, payload: str) -> str:
    key = hmac.new(settings.SECRET_KEY.encode(), f"{purpose}|{principal.tenant_id}".encode(), hashlib.sha256).digest()
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Owner:
    """Where a memory lives and who wrote it."""

    scope: str
    user: str
    repository: str
    session: str
    author: str

    def key(self) -> str:
        return f"{self.scope}|{self.user}|{self.repository}|{self.session}"


def resolve_owner(
    *, principal: Principal, scope: str, user: str = "", repository: str = "", session: str = ""
) -> Owner:
    """The scope owner of a new memory, checked against the token's bindings.

    user scope needs a user; repository scope a repository; session scope a session and its
    owner (the user). A token bound to a user acts as that user; naming another is a 403; a token
    bound to repositories only writes repository scope (``tenants.access``).
    """
    check_scope(principal, scope)
    where = resolve_where(principal, user=user, repository=repository, session=session)
    user, repository, session = where.user, where.repository, where.session
    required = {Scope.USER: "user", Scope.REPOSITORY: "repository", Scope.SESSION: "session"}[Scope(scope)]
    if not {"user": user, "repository": repository, "session": session}[required]:
        raise ValidationError(f"'{required}' is required for {scope} scope.", fields={required: ["Required."]})
    if scope == Scope.SESSION and not user:
        raise ValidationError("A session belongs to a user: 'user' is required.", fields={"user": ["Required."]})
    if scope == Scope.USER:
        return Owner(scope, user, "", "", user)
    if scope == Scope.REPOSITORY:
        return Owner(scope, "", repository, "", user)
    return Owner(scope, user, repository, session, user)


def _check_choice(value: str, choices: type[models.TextChoices], field: str) -> None:
    if value not in choices.values:
        raise ValidationError(
            f"'{field}' must be one of: {', '.join(v for v in choices.values if v)}.",
            fields={field: ["Not a valid choice."]},
        )


def validate_fields(
    *,
    kind: str | None = None,
    scope: str | None = None,
    priority: str | None = None,
    lifecycle: str | None = None,
    title: str | None = None,
    tags: object = None,
    metadata: object = None,
    solved_query: str | None = None,
) -> None:
    """Enums and limits of a memory's fields, for every interface (REST, MCP, commands).

    Messages name the field and never repeat the submitted value.
    """
    enums: dict[str, tuple[str | None, type[models.TextChoices]]] = {
        "kind": (kind, Kind),
        "scope": (scope, Scope),
        "priority": (priority, Priority),
        "lifecycle": (lifecycle, Lifecycle),
    }
    for name, (value, choices) in enums.items():
        if value is not None:
            _check_choice(value, choices, name)
    if title is not None and len(title) > MAX_TITLE_CHARS:
        raise ValidationError(f"'title' exceeds {MAX_TITLE_CHARS} characters.", fields={"title": ["Too long."]})
    if solved_query is not None and len(solved_query) > MAX_SOLVED_QUERY_CHARS:
        raise ValidationError(
            f"'solved_query' exceeds {MAX_SOLVED_QUERY_CHARS} characters.", fields={"solved_query": ["Too long."]}
        )
    if tags is not None and (
        not isinstance(tags, list)
        or len(tags) > MAX_TAGS
        or any(not isinstance(t, str) or len(t) > MAX_TAG_CHARS for t in tags)
    ):
        raise ValidationError(
            f"'tags' takes at most {MAX_TAGS} strings of at most {MAX_TAG_CHARS} characters.",
            fields={"tags": ["Too many or too long."]},
        )
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise ValidationError("'metadata' must be a JSON object.", fields={"metadata": ["Expected an object."]})
        validate_metadata_keys(metadata)


def check_raw_text(text: object) -> None:
    """The text of a write, before masking: a non-empty string of at most MAX_RAW_TEXT_CHARS (413)."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("'text' must not be empty.", fields={"text": ["Required."]})
    if len(text) > MAX_RAW_TEXT_CHARS:
        raise PayloadTooLargeError(
            f"'text' exceeds {MAX_RAW_TEXT_CHARS} characters.",
            fields={"text": [f"At most {MAX_RAW_TEXT_CHARS} characters before masking."]},
        )


def _check_sizes(values: dict) -> None:
    if len(values["text"].encode()) > MAX_TEXT_BYTES:
        raise PayloadTooLargeError(
            f"'text' exceeds {MAX_TEXT_BYTES} bytes after masking.",
            fields={"text": [f"At most {MAX_TEXT_BYTES} bytes."]},
        )
    if len(json.dumps(values.get("metadata") or {}).encode()) > MAX_METADATA_BYTES:
        raise PayloadTooLargeError(
            f"'metadata' exceeds {MAX_METADATA_BYTES} bytes.",
            fields={"metadata": [f"At most {MAX_METADATA_BYTES} bytes."]},
        )


def _search_vector(memory: Memory) -> SearchVector:
    document = lexical_document(title=memory.title, text=memory.text, tags=memory.tags, occurred_at=memory.occurred_at)
    return SearchVector(Value(document, output_field=TextField()), config="simple")


#: Memories per embedding task queued by a write (a bulk write queues one task per this many).
EMBEDDING_TASK_IDS = 100


def _enqueue_embedding(memories: list[Memory]) -> None:
    """After commit, queue the embedding of ``memories`` (of one tenant; ids only), in tasks of up
    to EMBEDDING_TASK_IDS. A broker outage leaves them pending for the sweep."""
    from memory_service.memories.tasks import enqueue_embedding

    tenant_id, ids = str(memories[0].tenant_id), [str(memory.id) for memory in memories]
    chunks = [ids[start : start + EMBEDDING_TASK_IDS] for start in range(0, len(ids), EMBEDDING_TASK_IDS)]
    transaction.on_commit(lambda: [enqueue_embedding(tenant_id=tenant_id, memory_ids=chunk) for chunk in chunks])


def _record_write(*, principal: Principal, action: Action, memory: Memory, details: dict) -> None:
    audit_event_record(
        tenant=principal.tenant,
        actor=actor_of(principal),
        action=action,
        resource_type="memory",
        resource_ids=[memory.id],
        details={"scope": memory.scope, "kind": memory.kind, "author": user_pseudonym(memory.author)} | details,
    )


def _link_supersessions(*, principal: Principal, memory: Memory, supersedes: list[dict]) -> None:
    """Link ``memory`` as the replacement of each memory of ``supersedes``. NotFoundError (404)
    naming the field when one is missing or not the token's to read (another tenant's looks the
    same on purpose)."""
    for item in supersedes:
        try:
            old = memory_get(principal=principal, memory_id=item["id"])
        except NotFoundError as exc:
            raise NotFoundError(
                "No such memory to supersede.", fields={"supersedes": [f"No memory {item['id']}."]}
            ) from exc
        if old.id == memory.id:
            raise ValidationError("A memory cannot supersede itself.", fields={"supersedes": ["Self reference."]})
        check_supersede(old=old, new=memory, field="supersedes")
        Supersession.objects.get_or_create(
            tenant=principal.tenant, old=old, new=memory, defaults={"partial": bool(item.get("partial", False))}
        )


@dataclass
class _Write:
    """A new memory's fields, checked and masked: what ``memory_create`` looks up and inserts."""

    owner: Owner
    values: dict  # masked text, title, tags, metadata, solved_query
    pii: dict[str, int]
    kind: str
    priority: str
    lifecycle: str
    external_id: str
    occurred_at: datetime | None
    valid_until: datetime | None
    name: str
    supersedes: list[dict]
    dedup_key: str
    request_hash: str
    started: float  # time.perf_counter() when the write (or its batch) began: its activity row's latency
    bulk: bool  # an item of ``memory_create_many``


#: Where a memory goes when the writer names no scope: what describes the person (preferences,
#: profile) to the user's own scope, everything else (lessons, decisions, conclusions, notes…) to
#: the repository, where every agent working on it finds it.
USER_SCOPE_KINDS = frozenset({Kind.PREFERENCE, Kind.PROFILE})


def default_scope(kind: str) -> str:
    """The scope a memory of ``kind`` is written to when none is given."""
    return Scope.USER if kind in USER_SCOPE_KINDS else Scope.REPOSITORY


def _write_checked(
    *,
    principal: Principal,
    started: float | None = None,
    bulk: bool = False,
    text: str,
    scope: str | None = None,
    kind: str = Kind.NOTE,
    user: str = "",
    repository: str = "",
    session: str = "",
    priority: str = Priority.NORMAL,
    title: str = "",
    tags: list[str] | None = None,
    metadata: dict | None = None,
    solved_query: str = "",
    external_id: str = "",
    occurred_at: datetime | None = None,
    valid_until: datetime | None = None,
    lifecycle: str = Lifecycle.NONE,
    supersedes: list[dict] | None = None,
    name: str = "",
) -> _Write:
    """A write validated and its free text masked; raises the write's 4xx. Reads no table.
    ``scope``: by default that of ``kind`` (``default_scope``); ``started``: when its batch began
    (default: now); ``bulk``: an item of ``memory_create_many`` (``Memory.origin``)."""
    started = time.perf_counter() if started is None else started
    scope = default_scope(kind) if scope is None else scope
    require_permission(principal, Permission.MEMORY_WRITE)
    check_raw_text(text)
    if external_id:
        validate_identifier(external_id, field="external_id")
    validate_fields(
        kind=kind, scope=scope, priority=priority, lifecycle=lifecycle, title=title, tags=tags or [],
        metadata=metadata or {}, solved_query=solved_query,
    )  # fmt: skip
    if lifecycle and kind != Kind.DECISION:
        raise ValidationError("Only decisions have a lifecycle.", fields={"lifecycle": ["Decisions only."]})
    owner = resolve_owner(principal=principal, scope=scope, user=user, repository=repository, session=session)
    tags = tags or []
    metadata = metadata or {}
    # Before hashing: a lone surrogate cannot even be encoded.
    check_storable({"text": text, "title": title, "tags": tags, "metadata": metadata, "solved_query": solved_query})
    raw_request = json.dumps(
        [owner.key(), text, kind, priority, title, tags, metadata, solved_query, lifecycle, str(occurred_at)],
        sort_keys=True,
        ensure_ascii=False,
    )
    dedup_key = _tenant_hmac(principal, "dedup", f"{owner.key()}|{text}")
    request_hash = _tenant_hmac(principal, "request", raw_request)
    masked = mask_fields(
        tenant=principal.tenant,
        fields={"text": text, "title": title, "tags": tags, "metadata": metadata, "solved_query": solved_query},
    )
    del text, title, tags, metadata, solved_query  # from here on only masked values exist
    _check_sizes(masked.values)
    return _Write(
        owner=owner, values=masked.values, pii=masked.counts, kind=kind, priority=priority, lifecycle=lifecycle,
        external_id=external_id, occurred_at=occurred_at, valid_until=valid_until, name=name,
        supersedes=supersedes or [], dedup_key=dedup_key, request_hash=request_hash, started=started, bulk=bulk,
    )  # fmt: skip


def _external_key(owner: "Owner | Memory", external_id: str) -> tuple[str, str, str, str, str]:
    """An owner (``Owner`` or ``Memory``) and an ``external_id``: unique per tenant."""
    return (owner.scope, owner.user, owner.repository, owner.session, external_id)


@dataclass
class _Stored:
    """The memories that some writes may repeat, by external key and by dedup key."""

    by_external_id: dict[tuple[str, str, str, str, str], Memory]
    by_dedup_key: dict[str, Memory]

    @classmethod
    def for_writes(cls, principal: Principal, writes: list[_Write]) -> "_Stored":
        """Two queries, whatever the number of writes."""
        memories = Memory.objects.for_tenant(principal.tenant)
        by_external_id = {}
        keys = [_external_key(w.owner, w.external_id) for w in writes if w.external_id]
        if keys:
            names = ("scope", "user", "repository", "session", "external_id")
            wanted = functools.reduce(operator.or_, (Q(**dict(zip(names, key, strict=True))) for key in keys))
            by_external_id = {_external_key(m, m.external_id): m for m in memories.filter(wanted)}
        by_dedup_key = {m.dedup_key: m for m in memories.filter(dedup_key__in={w.dedup_key for w in writes})}
        return cls(by_external_id, by_dedup_key)

    def repeated_by(self, write: _Write) -> Memory | None:
        """The memory ``write`` repeats (same ``external_id`` and body, or the same text for the
        same owner); None for a new one. ConflictError (409) when its ``external_id`` is taken by
        a different body."""
        if write.external_id:
            existing = self.by_external_id.get(_external_key(write.owner, write.external_id))
            if existing is not None:
                if existing.request_hash != write.request_hash:
                    raise ConflictError(
                        "A memory with this external_id exists with a different body.",
                        fields={"external_id": ["Already used with a different body."]},
                    )
                return existing
        return self.by_dedup_key.get(write.dedup_key)

    def add(self, memory: Memory) -> None:
        """A memory about to be stored: later writes of the same request repeat it."""
        if memory.external_id:
            self.by_external_id[_external_key(memory, memory.external_id)] = memory
        self.by_dedup_key[memory.dedup_key] = memory


def _origin(write: _Write) -> str:
    """How ``write`` came in (``Memory.origin``): only session notes have a name."""
    if write.name:
        return Origin.SESSION_NOTE
    return Origin.BULK if write.bulk else Origin.SINGLE


#: The longest pause between two turns of one conversation (``continues_thread``).
THREAD_GAP = timedelta(hours=1)


def continues_thread(before: _Write, write: _Write) -> bool:
    """Whether ``write`` is the next turn of a conversation after ``before``, the accepted item
    before it in a bulk request (one refused in between is skipped): both notes of the same scope
    owner, each with the time it was said (``occurred_at``), ``write``'s from 0 to ``THREAD_GAP``
    after ``before``'s.

    A conversation imported turn by turn reads this way; lessons, decisions and the other kinds
    stand on their own, and notes without a time or from different days are not threaded.
    """
    if before.kind != Kind.NOTE or write.kind != Kind.NOTE or before.owner.key() != write.owner.key():
        return False
    if before.occurred_at is None or write.occurred_at is None:
        return False
    return timedelta(0) <= write.occurred_at - before.occurred_at <= THREAD_GAP


# The note a new turn continues (``thread_end``): the index ``memory_owner_kind_occurred`` read from
# its end, the row locked against deletion until the transaction ends.
_THREAD_END_SQL = """
    SELECT id FROM memories_memory
    WHERE tenant_id = %s AND owner_key = %s AND kind = %s AND occurred_at >= %s AND occurred_at <= %s
      AND scope = %s AND "user" = %s AND repository = %s AND session = %s AND source_client = %s
    ORDER BY occurred_at DESC, created_at DESC LIMIT 1 FOR KEY SHARE"""


def thread_end(principal: Principal, write: _Write) -> uuid.UUID | None:
    """The note that ``write`` continues — a single write, or the first turn of a bulk request —
    of the scope owner's notes written by the same client (``source_client``) and said from
    ``THREAD_GAP`` before ``write``'s time up to it, the one said last (written last of those said
    at the same time): ``continues_thread``'s rule across requests, so a conversation sent turn by
    turn or in several requests stays one thread. None when ``write`` is not a note with a time,
    or there is none. The owner is one the token may write to (``resolve_owner``), so it may read
    its notes too; another client's notes are never continued, so an agent cannot attach its note
    to another's in a shared scope and borrow its score.

    One statement reading the index by owner, kind and time from its end (no ORM: compiling the
    query cost ~2 ms a write); the row is locked against deletion until the transaction ends
    (``FOR KEY SHARE``), so the link cannot name a memory deleted in between."""
    if write.kind != Kind.NOTE or write.occurred_at is None:
        return None
    owner = write.owner
    by_scope = {Scope.USER: owner.user, Scope.REPOSITORY: owner.repository, Scope.SESSION: owner.session}
    named = by_scope[Scope(owner.scope)]
    params = [principal.tenant_id, owner_key(owner.scope, named), Kind.NOTE.value, write.occurred_at - THREAD_GAP,
              write.occurred_at, owner.scope, owner.user, owner.repository, owner.session, principal.name]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_THREAD_END_SQL, params)
        row = cursor.fetchone()
    return row[0] if row else None


def _new_memory(principal: Principal, write: _Write, now: datetime, thread_previous: uuid.UUID | None = None) -> Memory:
    owner, values = write.owner, write.values
    memory = Memory(
        tenant=principal.tenant,
        scope=owner.scope,
        user=owner.user,
        repository=owner.repository,
        session=owner.session,
        author=owner.author,
        name=write.name,
        kind=write.kind,
        priority=write.priority,
        confidence=Confidence.RAW,
        lifecycle=write.lifecycle,
        title=values["title"],
        text=values["text"],
        tags=values["tags"],
        metadata=values["metadata"],
        solved_query=values["solved_query"],
        external_id=write.external_id,
        origin=_origin(write),
        dedup_key=write.dedup_key,
        request_hash=write.request_hash,
        source_client=principal.name,
        masker_version=masker_version(),
        occurred_at=write.occurred_at or now,
        thread_previous_id=thread_previous,
        valid_until=write.valid_until,
        expires_at=now + principal.tenant.session_ttl if owner.scope == Scope.SESSION else None,
        created_at=now,
    )
    memory.search_vector = _search_vector(memory)
    return memory


def _record_created(principal: Principal, created: list[tuple[Memory, _Write]]) -> None:
    """What follows new memories in their transaction: their audit events and their activity rows
    (one insert each), then, after commit, their embedding and the digests they change."""
    if not created:
        return
    audit_events_record(
        tenant=principal.tenant,
        actor=actor_of(principal),
        events=[
            EventSpec(
                action=Action.OFFLOAD,
                resource_type="memory",
                resource_ids=[memory.id],
                details={
                    "scope": memory.scope,
                    "kind": memory.kind,
                    "author": user_pseudonym(memory.author),
                    "bytes": len(memory.text.encode()),
                    "pii": write.pii,
                },
            )
            for memory, write in created
        ],
    )
    now = time.perf_counter()
    ActivityLog.objects.bulk_create(
        ActivityLog(
            tenant=principal.tenant,
            operation=ActivityLog.Operation.WRITE,
            client=principal.name,
            user=user_pseudonym(memory.author),
            filters={"kind": memory.kind, "priority": memory.priority, "scope": memory.scope},
            latency_ms=round((now - write.started) * 1000, 2),
            memory_ids=[memory.id],
            solved_query=memory.solved_query,
        )
        for memory, write in created
    )
    memories = [memory for memory, _write in created]
    _enqueue_embedding(memories)
    refresh_after_writes(memories)


def _create(principal: Principal, write: _Write, thread_previous: uuid.UUID | None = None) -> MemoryWriteResult:
    """Store one checked write, in its own savepoint (a lost race returns the winner);
    ``thread_previous``: the turn it continues (``memory_create_many``)."""
    with transaction.atomic():
        existing = _Stored.for_writes(principal, [write]).repeated_by(write)
        if existing is not None:
            return MemoryWriteResult(memory=existing, created=False, pii=write.pii)
        memory = _new_memory(principal, write, timezone.now(), thread_previous)
        try:
            with transaction.atomic():
                memory.save(force_insert=True)
        except IntegrityError:
            # A concurrent identical write won the race: return what it stored.
            winner = Memory.objects.for_tenant(principal.tenant).filter(dedup_key=write.dedup_key).first()
            if winner is None:
                raise
            return MemoryWriteResult(memory=winner, created=False, pii=write.pii)
        # The saved value is an SQL expression: leave the field deferred, as the manager loads it.
        del memory.__dict__["search_vector"]
        _link_supersessions(principal=principal, memory=memory, supersedes=write.supersedes)
        _record_created(principal, [(memory, write)])
    return MemoryWriteResult(memory=memory, created=True, pii=write.pii)


def memory_create(*, principal: Principal, **fields: Any) -> MemoryWriteResult:
    """Store one memory, masked. Idempotent by ``external_id`` (a different body is a 409) and by
    exact duplicate text in the same scope owner (the existing memory is returned).

    ``fields``: ``text``, and optionally ``scope`` (by default that of the kind: ``default_scope``),
    ``kind``, ``user``, ``repository``, ``session``, ``priority``, ``title``, ``tags``, ``metadata``,
    ``solved_query``, ``external_id``, ``occurred_at``, ``valid_until``, ``lifecycle``,
    ``supersedes``, ``name``. A new note with its ``occurred_at`` continues the owner's
    conversation (``thread_end``).
    """
    write = _write_checked(principal=principal, **fields)
    return _create(principal, write, thread_end(principal, write))


def memory_create_many(*, principal: Principal, items: list[dict]) -> list[MemoryWriteResult | ApplicationError]:
    """``memory_create`` of each item (a dict of its ``fields``), in order: the list holds each
    item's result, or the error that refused it, and no item's error changes another's outcome.

    The outcome is that of one ``memory_create`` per item, except that a new note continuing a
    conversation (``continues_thread``: the accepted item before it, if new; for the first accepted
    item, ``thread_end``: the owner's note said last in the hour up to it) is linked to that turn
    (``Memory.thread_previous``). The work is batched: the free-text fields of the items masked a
    part at a time (``masking_parts``: a large request in a few parts, each stored while the next
    is masked), two lookups for the repeats of a part's items, one insert each for its new
    memories, their audit events and their activity rows, and embedding tasks of up to
    ``EMBEDDING_TASK_IDS`` memories. An item that supersedes others is written on its own, in its
    place; a batch that loses a race to a concurrent write is written again item by item. Parts
    are stored in order, so an item repeating an earlier part's item finds it stored. Runs in the
    caller's transaction.
    """
    require_permission(principal, Permission.MEMORY_WRITE)
    started = time.perf_counter()  # each item's activity row counts the batch's time up to its insert
    results: list = [None] * len(items)
    # item index → index of the turn it continues, or the id of the stored note the first continues
    follows: dict[int, int | uuid.UUID] = {}
    last: tuple[int, _Write] | None = None
    free_text = [{name: item[name] for name in MASKED_FIELDS if name in item} for item in items]
    for indexes, masked in masking_parts(tenant=principal.tenant, values=free_text):
        checked: list[tuple[int, _Write]] = []
        with masked:
            for index in indexes:
                try:
                    write = _write_checked(principal=principal, started=started, bulk=True, **items[index])
                except ApplicationError as exc:
                    results[index] = exc
                    continue
                checked.append((index, write))
                if last is None and (earlier := thread_end(principal, write)) is not None:
                    follows[index] = earlier
                if last is not None and continues_thread(last[1], write):
                    follows[index] = last[0]
                last = (index, write)
        # Runs of plain writes are stored together; a write that supersedes is stored alone.
        runs = itertools.groupby(checked, key=lambda pair: object() if pair[1].supersedes else False)
        for _key, run in runs:
            _create_run(principal, list(run), results=results, follows=follows)
    return results


def _turn_before(index: int, *, results: list, follows: dict) -> uuid.UUID | None:
    """The id of the memory created for the turn that item ``index`` continues, or of the stored
    note it continues; None when it continues none, or that item repeated a stored memory or was
    refused."""
    before = follows.get(index)
    if isinstance(before, uuid.UUID):
        return before
    outcome = results[before] if before is not None else None
    return outcome.memory.id if isinstance(outcome, MemoryWriteResult) and outcome.created else None


def _create_run(principal: Principal, run: list[tuple[int, _Write]], *, results: list, follows: dict) -> None:
    """Store a run of checked writes, each outcome in ``results`` at its index (see
    ``memory_create_many``); ``follows``: item index → index of the turn it continues, or the id
    of the stored note it continues."""
    if len(run) == 1 or any(write.supersedes for _index, write in run):
        for index, write in run:
            results[index] = _create_or_error(principal, write, _turn_before(index, results=results, follows=follows))
        return
    try:
        with transaction.atomic():
            stored = _Stored.for_writes(principal, [write for _index, write in run])
            created = []
            for index, write in run:
                try:
                    existing = stored.repeated_by(write)
                except ConflictError as exc:
                    results[index] = exc
                    continue
                if existing is not None:
                    results[index] = MemoryWriteResult(memory=existing, created=False, pii=write.pii)
                    continue
                previous = _turn_before(index, results=results, follows=follows)
                memory = _new_memory(principal, write, timezone.now(), previous)  # later items, later times
                stored.add(memory)
                created.append((memory, write))
                results[index] = MemoryWriteResult(memory=memory, created=True, pii=write.pii)
            Memory.objects.bulk_create([memory for memory, _write in created])
            for memory, _write in created:
                del memory.__dict__["search_vector"]  # as after ``save``: an SQL expression
            _record_created(principal, created)
    except IntegrityError:
        # A concurrent write stored one of these first: write each again on its own (in order, so
        # each turn before is this loop's outcome, not the batch's rolled-back memory).
        for index, write in run:
            results[index] = _create_or_error(principal, write, _turn_before(index, results=results, follows=follows))


def _create_or_error(
    principal: Principal, write: _Write, thread_previous: uuid.UUID | None = None
) -> MemoryWriteResult | ApplicationError:
    try:
        return _create(principal, write, thread_previous)
    except ApplicationError as exc:
        return exc


# What a person vouches for when validating a memory: changing any of it needs a person again.
REVIEWED_FIELDS = ("text", "title", "tags", "metadata", "solved_query", "kind", "priority", "lifecycle")
EDITABLE_FIELDS = {"text", "title", "tags", "metadata", "solved_query", "kind", "priority", "lifecycle",
                   "valid_until", "occurred_at"}  # fmt: skip


def _locked_memory(*, principal: Principal, memory_id: uuid.UUID | str, first_reply: bool = False) -> Memory:
    """The memory ``memory_get`` returns, locked until the transaction ends; NotFoundError if it
    was deleted while we waited for the lock.

    The lock also waits for an embedder writing the memory's vector (it holds the row meanwhile),
    so a delete or an edit that follows sees that vector and removes it. ``first_reply``: the
    first memory linked to it (whose vector an edit of its text makes pending, migration 0021) is
    locked in the same statement, both in id order as every statement locking several memories
    does, so that the edit never waits for it while holding this one.
    """
    visible = memory_get(principal=principal, memory_id=memory_id)
    memories = Memory.objects.for_tenant(principal.tenant)
    ids = [visible.id]
    if first_reply:
        reply = memories.filter(thread_previous_id=visible.id).order_by("created_at", "id").values_list("id", flat=True)
        ids += reply[:1]
    locked = memories.select_for_update(of=("self",)).filter(id__in=ids).order_by("id")
    memory = next((m for m in locked if m.id == visible.id), None)
    if memory is None:
        raise NotFoundError()
    return memory


def memory_update(*, principal: Principal, memory_id: uuid.UUID | str, changes: dict) -> MemoryWriteResult:
    """Edit a memory the token can read: free text is re-masked and the memory re-embedded.

    Any change to what a person vouched for (``REVIEWED_FIELDS``) sends a validated memory back to
    ``raw``, and so out of the pinned set, until a person validates it again.
    """
    require_permission(principal, Permission.MEMORY_WRITE)
    unknown = set(changes) - EDITABLE_FIELDS
    if unknown:
        raise ValidationError("These fields cannot be edited.", fields={name: ["Not editable."] for name in unknown})
    validate_fields(**{k: v for k, v in changes.items() if k in ("kind", "priority", "lifecycle", "title", "tags",
                                                                 "metadata", "solved_query")})  # fmt: skip
    if "text" in changes:
        check_raw_text(changes["text"])
    with transaction.atomic():
        memory = _locked_memory(principal=principal, memory_id=memory_id, first_reply="text" in changes)
        free_text = {name: changes[name] for name in MASKED_FIELDS if name in changes}
        masked = mask_fields(tenant=principal.tenant, fields=free_text)
        before = {name: getattr(memory, name) for name in REVIEWED_FIELDS}
        for name, value in (changes | masked.values).items():
            setattr(memory, name, value)
        if any(getattr(memory, name) != value for name, value in before.items()):
            memory.confidence = Confidence.RAW
        if memory.lifecycle and memory.kind != Kind.DECISION:
            raise ValidationError("Only decisions have a lifecycle.", fields={"lifecycle": ["Decisions only."]})
        if not memory.text.strip():
            raise ValidationError("'text' must not be empty.", fields={"text": ["Required."]})
        _check_sizes({"text": memory.text, "metadata": memory.metadata})
        if "text" in changes:
            owner_key = f"{memory.scope}|{memory.user}|{memory.repository}|{memory.session}"
            memory.dedup_key = _tenant_hmac(principal, "dedup", f"{owner_key}|{changes['text']}")
        memory.masker_version = masker_version()
        memory.embedding_status = EmbeddingStatus.PENDING
        memory.search_vector = _search_vector(memory)
        try:
            with transaction.atomic():
                memory.save()
        except IntegrityError as exc:
            raise ConflictError(
                "Another memory in this scope already has this text.", fields={"text": ["Duplicate."]}
            ) from exc
        memory.refresh_from_db()
        memory.embeddings.all().delete()
        _record_write(
            principal=principal,
            action=Action.UPDATE,
            memory=memory,
            details={"fields": sorted(changes), "pii": masked.counts},
        )
        _enqueue_embedding([memory])
        refresh_after_write(memory)
    return MemoryWriteResult(memory=memory, created=False, pii=masked.counts)


def memory_delete(*, principal: Principal, memory_id: uuid.UUID | str) -> None:
    """Delete a memory the token can read, with its vectors and supersession links."""
    require_permission(principal, Permission.MEMORY_WRITE)
    with transaction.atomic():
        memory = _locked_memory(principal=principal, memory_id=memory_id)
        _record_write(principal=principal, action=Action.DELETE, memory=memory, details={})
        refresh_after_write(memory)
        memory.delete()


def memory_supersede(
    *, principal: Principal, memory_id: uuid.UUID | str, by_id: uuid.UUID | str, partial: bool = False
) -> Memory:
    """Record that ``by_id`` replaces ``memory_id`` (wholly, or in part). Both must be readable, and
    ``by_id`` at least as visible as ``memory_id`` (``tenants.access.check_supersede``)."""
    require_permission(principal, Permission.MEMORY_WRITE)
    with transaction.atomic():
        old = memory_get(principal=principal, memory_id=memory_id)
        new = memory_get(principal=principal, memory_id=by_id)
        if old.id == new.id:
            raise ValidationError("A memory cannot supersede itself.", fields={"by": ["Same memory."]})
        check_supersede(old=old, new=new, field="by")
        link, created = Supersession.objects.get_or_create(
            tenant=principal.tenant, old=old, new=new, defaults={"partial": partial}
        )
        if not created and link.partial != partial:
            link.partial = partial
            link.save(update_fields=["partial"])
        audit_event_record(
            tenant=principal.tenant,
            actor=actor_of(principal),
            action=Action.SUPERSEDE,
            resource_type="memory",
            resource_ids=[old.id, new.id],
            details={"partial": partial},
        )
        refresh_after_write(old)
    return old


def memory_promote(*, tenant: Tenant, actor: str, memory: Memory) -> Memory:
    """raw → validated: a human vouches for the memory (admin token or admin review queue)."""
    with tenant_context(tenant.id):
        updated = (
            Memory.objects.for_tenant(tenant)
            .filter(id=memory.id, confidence=Confidence.RAW)
            .update(confidence=Confidence.VALIDATED, updated_at=timezone.now())
        )
        if updated:
            audit_event_record(
                tenant=tenant, actor=actor, action=Action.PROMOTE, resource_type="memory", resource_ids=[memory.id]
            )
        memory.refresh_from_db()
    return memory


def memory_reject(*, tenant: Tenant, actor: str, memory: Memory) -> None:
    """A reviewer judged a raw memory wrong: it is deleted (audited as ``delete``, reason ``review``).

    A memory already validated or already gone is a 409: someone else reviewed it first.
    """
    with tenant_context(tenant.id):
        locked = Memory.objects.for_tenant(tenant).select_for_update().filter(id=memory.id).first()
        if locked is None or locked.confidence != Confidence.RAW:
            raise ConflictError("This memory was already reviewed.", fields={"confidence": ["Not raw."]})
        audit_event_record(
            tenant=tenant,
            actor=actor,
            action=Action.DELETE,
            resource_type="memory",
            resource_ids=[locked.id],
            details={"scope": locked.scope, "kind": locked.kind, "author": user_pseudonym(locked.author),
                     "reason": "review"},
        )  # fmt: skip
        refresh_after_write(locked)
        locked.delete()


def session_note_write(
    *, principal: Principal, session: str, name: str, text: str, user: str = "", repository: str = "", title: str = ""
) -> MemoryWriteResult:
    """Write or overwrite the session note ``name`` (plan, todo…) of ``session``."""
    validate_identifier(name, field="name")
    owner = resolve_owner(principal=principal, scope=Scope.SESSION, user=user, repository=repository, session=session)
    with transaction.atomic():
        existing = (
            Memory.objects.for_tenant(principal.tenant)
            .filter(scope=Scope.SESSION, user=owner.user, session=owner.session, name=name)
            .first()
        )
        if existing is None:
            return memory_create(
                principal=principal, text=text, scope=Scope.SESSION, user=owner.user, repository=owner.repository,
                session=owner.session, title=title, name=name,
            )  # fmt: skip
        result = memory_update(principal=principal, memory_id=existing.id, changes={"text": text, "title": title})
        Memory.objects.for_tenant(principal.tenant).filter(id=existing.id).update(
            expires_at=timezone.now() + principal.tenant.session_ttl
        )
        return result
