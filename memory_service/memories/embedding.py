"""Storing vectors. Runs inside a tenant context (tasks and commands set it)."""

import regex
from django.db import transaction
from django.utils import timezone

from memory_service.embeddings.backends import EmbeddingUnavailable, get_backend, get_rescore_backend
from memory_service.memories.models import EmbeddingStatus, Memory, MemoryEmbedding
from memory_service.pii import text_for_embedding
from memory_service.retrieval.candidates import speaker_line
from memory_service.retrieval.lexical import date_terms

#: A reply of at most this many words (a CJK character half a word; the speaker's name one) is
#: embedded with the turn it answers (``reply_context``): bench/RESULTS.md, "A reply's vector".
REPLY_WORDS = 36
#: Of the turn a reply answers, its last this many words (a long turn would drown the reply).
ANSWERED_WORDS = 72
_WORD = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]{1,2}|[^\s\p{Han}\p{Hiragana}\p{Katakana}]+")
# A turn of a transcript: its first line opens with a speaker's masked name and a colon, in the
# forms search reads a speaker in (``retrieval.candidates.speaker_pattern``).
_TRANSCRIPT_TURN = regex.compile(speaker_line("<PERSON(?:_[0-9a-f]{12})?>"))


def embedding_document(memory: Memory, answered: str = "") -> str:
    """What the vector of a memory represents: title, ``answered`` (the text of the turn a short
    reply answers, ``reply_context``), text, tags and the memory's date, without people's labels
    and pseudonyms (``pii.text_for_embedding``)."""
    parts = [memory.title, answered, memory.text, " ".join(memory.tags), date_terms(memory.occurred_at)]
    return text_for_embedding("\n".join(p for p in parts if p))


def embedding_documents(memories: list[Memory]) -> list[str]:
    """``embedding_document`` of each of ``memories``, with the turns their replies answer."""
    answered = reply_context(memories)
    return [embedding_document(m, answered.get(m.id, "")) for m in memories]


def reply_context(memories: list[Memory]) -> dict:
    """Memory id → the stored text of the turn it answers (of a long turn, its last
    ``ANSWERED_WORDS`` words), for those of ``memories`` that are short replies in a transcript: a
    note linked to the turn before it (``Memory.thread_previous``), both opening with a speaker's
    masked name and a colon, the reply of at most ``REPLY_WORDS`` words and the first memory linked
    to that turn (by creation, then id: a note written later with an earlier time can be linked to
    a turn that already has its reply).

    "Yes, on the train. It's a stethoscope engraved with a little wave" is found for "What did her
    colleagues give her when she left?" only with the question it answers. Notes that are no
    transcript's turns (an agent's notes written within the hour are linked too) keep their own
    text alone: the turn before them is no context of theirs. Two statements for all of them.
    When the turn before is deleted or its text edited, the database makes its first reply pending
    again (migration 0021), so no vector keeps words its text no longer answers; one reply a turn
    at most, so an edit costs at most one more embedding."""
    replies = {
        m.id: m.thread_previous_id
        for m in memories
        if m.thread_previous_id and _TRANSCRIPT_TURN.match(m.text) and len(_WORD.findall(m.text)) <= REPLY_WORDS
    }
    if not replies:
        return {}
    tenants, turns = {m.tenant_id for m in memories}, set(replies.values())
    before = dict(Memory.objects.filter(tenant_id__in=tenants, id__in=turns).values_list("id", "text"))
    first = dict(
        Memory.objects.filter(tenant_id__in=tenants, thread_previous_id__in=turns)
        .order_by("thread_previous_id", "created_at", "id")
        .distinct("thread_previous_id")
        .values_list("thread_previous_id", "id")
    )
    return {
        reply: _last_words(before[turn], ANSWERED_WORDS)
        for reply, turn in replies.items()
        if first.get(turn) == reply and turn in before and _TRANSCRIPT_TURN.match(before[turn])
    }


def _last_words(text: str, count: int) -> str:
    """``text`` from the start of its ``count``-th word from the end (all of it when shorter)."""
    starts = [word.start() for word in _WORD.finditer(text)]
    return text if len(starts) <= count else text[starts[-count] :]


def pending_memory_ids(*, tenant_id: str, limit: int, model: str | None = None) -> list[str]:
    """Ids of the tenant's memories without a vector in ``model`` (the active backend's by default)."""
    model = model or get_backend().model_id
    return [
        str(i)
        for i in Memory.objects.filter(tenant_id=tenant_id)
        .exclude(embeddings__model=model)
        .exclude(embedding_status=EmbeddingStatus.FAILED, embedding_model=model)
        .order_by("created_at")
        .values_list("id", flat=True)[:limit]
    ]


def claim_pending_memory_ids(*, tenant_id: str, memory_ids: list[str], extra: int) -> list[str]:
    """Lock, for this transaction, those of ``memory_ids`` still pending plus up to ``extra`` other
    pending memories of the tenant, oldest first. Rows another transaction holds are skipped: two
    workers never embed the same memory at once, and nothing is lost (the holder embeds it).
    """
    pending = Memory.objects.filter(tenant_id=tenant_id, embedding_status=EmbeddingStatus.PENDING)
    locking = {"skip_locked": True, "of": ("self",)}
    own = list(pending.filter(id__in=memory_ids).select_for_update(**locking).values_list("id", flat=True))
    others = []
    if extra > 0:
        others = list(
            pending.exclude(id__in=own)
            .order_by("created_at")
            .select_for_update(**locking)
            .values_list("id", flat=True)[:extra]
        )
    return [str(i) for i in [*own, *others]]


def embed_memories(*, tenant_id: str, memory_ids: list[str], backend=None, mark_ready: bool = True) -> int:
    """Compute and store vectors for those of ``memory_ids`` that lack one; returns how many.

    Must run in a transaction. Memories another transaction is embedding (or editing) right now
    are skipped, so concurrent embedders never wait on each other. On an embedder failure the
    memories stay ``pending`` (the sweep retries) and 0 is returned. ``mark_ready`` False (the
    re-scoring space's vectors) leaves the memories' embedding status as it is.
    """
    backend = backend or get_backend()
    memories = list(
        Memory.objects.filter(tenant_id=tenant_id, id__in=memory_ids)
        .exclude(embeddings__model=backend.model_id)
        .select_for_update(skip_locked=True, of=("self",))
    )
    if not memories:
        return 0
    try:
        vectors = backend.embed_passages(embedding_documents(memories))
    except EmbeddingUnavailable:
        return 0
    now = timezone.now()
    with transaction.atomic():
        MemoryEmbedding.objects.bulk_create(
            [
                MemoryEmbedding(tenant_id=tenant_id, memory=m, model=backend.model_id, embedding=v, created_at=now)
                for m, v in zip(memories, vectors, strict=True)
            ],
            ignore_conflicts=True,
        )
        if not mark_ready:
            return len(memories)
        Memory.objects.filter(tenant_id=tenant_id, id__in=[m.id for m in memories]).update(
            embedding_status=EmbeddingStatus.READY, embedding_model=backend.model_id
        )
    return len(memories)


def vectors_refresh(*, tenant_id: str, before, limit: int, backend=None) -> int:
    """Embed again, in place, up to ``limit`` of the tenant's ``backend`` vectors (the active one's
    by default) made before ``before``, oldest first; returns how many were replaced (0: none left,
    or the embedder failed). For when what a vector represents changed (``embedding_document``):
    search reads each old vector until its replacement commits. Must run in a transaction; a vector
    another transaction holds (its memory being edited or embedded) is skipped."""
    backend = backend or get_backend()
    stale = list(
        MemoryEmbedding.objects.filter(tenant_id=tenant_id, model=backend.model_id, created_at__lt=before)
        .select_related("memory")
        .order_by("created_at")
        .select_for_update(skip_locked=True, of=("self",))[:limit]
    )
    if not stale:
        return 0
    try:
        vectors = backend.embed_passages(embedding_documents([row.memory for row in stale]))
    except EmbeddingUnavailable:
        return 0
    now = timezone.now()
    for row, vector in zip(stale, vectors, strict=True):
        MemoryEmbedding.objects.filter(memory_id=row.memory_id, model=row.model).update(
            embedding=vector, created_at=now
        )
    return len(stale)


def vectors_made_before_count(*, model: str, before) -> int:
    """How many vectors of ``model`` (of every tenant the caller's context shows) were made before ``before``."""
    return MemoryEmbedding.objects.filter(model=model, created_at__lt=before).count()


def memories_without_vector_count(*, model: str) -> int:
    """How many memories (of every tenant the caller's context shows) have no vector of ``model``."""
    return Memory.objects.exclude(embeddings__model=model).count()


def memory_tenant_ids() -> list[str]:
    """Ids of the tenants that have memories, as far as the caller's context shows."""
    return [str(t) for t in Memory.objects.values_list("tenant_id", flat=True).distinct()]


def vectors_of_other_models_delete(*, model: str) -> int:
    """Delete every vector made neither by ``model`` nor by the re-scoring backend; returns how many
    rows were deleted."""
    rescorer = get_rescore_backend()
    keep = [model, rescorer.model_id] if rescorer is not None else [model]
    deleted, _ = MemoryEmbedding.objects.exclude(model__in=keep).delete()
    return deleted
