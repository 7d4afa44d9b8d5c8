import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Concat
from django.utils import timezone
from pgvector.django import HalfVectorField, VectorField

from tenants.models import Tenant, TenantQuerySet


class Scope(models.TextChoices):
    """Where a memory belongs: one person, one codebase, or one working session."""

    USER = "user"
    REPOSITORY = "repository"
    SESSION = "session"


def owner_key(scope: str, owner: str) -> str:
    """The key a scope owner's memories are filed under: ``"<scope>:<owner id>"``, as the database
    computes it in ``Memory.owner_key`` (``ScopeVector`` rows and an index of memories use it)."""
    return f"{scope}:{owner}"


class Kind(models.TextChoices):
    NOTE = "note"
    LESSON = "lesson"
    CONCLUSION = "conclusion"
    KNOWLEDGE = "knowledge"
    DECISION = "decision"
    PREFERENCE = "preference"
    PROFILE = "profile"
    IDEA = "idea"


class Priority(models.TextChoices):
    NORMAL = "normal"
    HIGH = "high"


class Confidence(models.TextChoices):
    """Agents write ``raw``; only a human promotes to ``validated``."""

    RAW = "raw"
    VALIDATED = "validated"


class Origin(models.TextChoices):
    """How a memory was written: one at a time, in a bulk write, or as a named session note."""

    SINGLE = "single", "single write"
    BULK = "bulk", "bulk write"
    SESSION_NOTE = "session_note", "session note"


class Lifecycle(models.TextChoices):
    """States set explicitly on decisions. Superseded states are derived from links, never stored."""

    NONE = "", "none"
    PROPOSED = "proposed"
    REJECTED = "rejected"
    DEPRECATED = "deprecated"


class EmbeddingStatus(models.TextChoices):
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


class MemoryManager(models.Manager["Memory"]):
    """Leaves the full-text vector out of every query unless asked for: nothing reads it back."""

    def get_queryset(self) -> TenantQuerySet["Memory"]:
        return TenantQuerySet(self.model, using=self._db).defer("search_vector")

    def for_tenant(self, tenant: Tenant | uuid.UUID | str) -> TenantQuerySet["Memory"]:
        """``TenantQuerySet.for_tenant`` of every memory."""
        return self.get_queryset().for_tenant(tenant)


class Memory(models.Model):
    """One thing an agent or a person wants remembered, masked before it was stored.

    Scope owner: ``user`` for user scope, ``repository`` for repository scope, ``session`` (owned by
    ``user``) for session scope. ``author`` is the user the writing token acted as.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    scope = models.CharField(max_length=16, choices=Scope.choices)
    user = models.CharField(max_length=128, blank=True, default="")
    repository = models.CharField(max_length=128, blank=True, default="")
    session = models.CharField(max_length=128, blank=True, default="")
    name = models.CharField(max_length=128, blank=True, default="", help_text="Session note name (plan, todo)")
    author = models.CharField(max_length=128, blank=True, default="")

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.NOTE)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    confidence = models.CharField(max_length=16, choices=Confidence.choices, default=Confidence.RAW)
    lifecycle = models.CharField(max_length=16, choices=Lifecycle.choices, blank=True, default=Lifecycle.NONE)

    title = models.CharField(max_length=512, blank=True, default="")
    text = models.TextField()
    tags = ArrayField(models.CharField(max_length=64), blank=True, default=list)
    metadata = models.JSONField(blank=True, default=dict)
    solved_query = models.TextField(blank=True, default="")

    external_id = models.CharField(max_length=128, blank=True, default="")
    # Set once, when the memory is created (``services._new_memory``); the review queue leaves
    # bulk writes and session notes out by default. The database default covers rows inserted
    # without the ORM.
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.SINGLE, db_default=Origin.SINGLE)
    dedup_key = models.CharField(max_length=64, help_text="Tenant-keyed HMAC of the raw text and scope owner")
    request_hash = models.CharField(max_length=64, help_text="Keyed hash of the raw request, for idempotent repeats")
    source_client = models.CharField(max_length=50, blank=True, default="")
    masker_version = models.CharField(max_length=32)

    embedding_status = models.CharField(max_length=16, choices=EmbeddingStatus.choices, default=EmbeddingStatus.PENDING)
    embedding_model = models.CharField(max_length=64, blank=True, default="")
    search_vector = SearchVectorField(null=True, editable=False)
    # The number of terms in ``search_vector`` (every position of every lexeme): the document
    # length of BM25 (``retrieval.candidates``), computed by the database (migration 0010).
    lexical_length = models.GeneratedField(
        expression=Func(F("search_vector"), function="memory_document_length", output_field=models.IntegerField()),
        output_field=models.IntegerField(),
        db_persist=True,
    )
    # "<scope>:<owner id>" (``owner_key()``), computed by the database. A plain column, so that a
    # comparison with it stays an index condition under row-level security (an expression over
    # the owner columns would not: text concatenation is not leakproof).
    owner_key = models.GeneratedField(
        expression=Concat(
            "scope",
            models.Value(":"),
            models.Case(
                models.When(scope=Scope.USER, then="user"),
                models.When(scope=Scope.REPOSITORY, then="repository"),
                default="session",
            ),
        ),
        output_field=models.CharField(max_length=160),
        db_persist=True,
    )

    occurred_at = models.DateTimeField(default=timezone.now)
    # The turn before this one when the memory is a turn of a conversation (``services``:
    # ``continues_thread`` within a bulk request, ``thread_end`` across requests). Search adds a
    # share of a turn's neighbours' scores to its own (``retrieval.search.add_thread_neighbours``).
    # Deleting the turn before sets it to null in the database, whichever path deletes (migration
    # 0020), so no link outlives a memory.
    thread_previous = models.ForeignKey(
        "self", null=True, blank=True, editable=False, related_name="+",
        on_delete=models.DO_NOTHING, db_constraint=False, db_index=False,
    )  # fmt: skip
    valid_until = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = MemoryManager()

    class Meta:
        verbose_name_plural = "memories"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "scope", "user", "repository", "session", "external_id"],
                condition=~Q(external_id=""),
                name="memory_external_id_unique_per_owner",
            ),
            models.UniqueConstraint(fields=["tenant", "dedup_key"], name="memory_dedup_key_unique"),
            models.UniqueConstraint(
                fields=["tenant", "user", "session", "name"],
                condition=Q(scope="session") & ~Q(name=""),
                name="memory_session_note_unique",
            ),
            models.CheckConstraint(
                condition=(
                    (Q(scope="user") & ~Q(user="") & Q(repository="") & Q(session=""))
                    | (Q(scope="repository") & ~Q(repository="") & Q(user="") & Q(session=""))
                    | (Q(scope="session") & ~Q(session="") & ~Q(user=""))
                ),
                name="memory_scope_owner",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="memory_tenant_created"),
            models.Index(fields=["tenant", "scope", "user"], name="memory_tenant_user"),
            models.Index(fields=["tenant", "repository"], name="memory_tenant_repository"),
            models.Index(fields=["tenant", "session"], name="memory_tenant_session"),
            models.Index(fields=["tenant", "kind"], name="memory_tenant_kind"),
            models.Index(
                fields=["tenant", "expires_at"], name="memory_tenant_expires", condition=Q(expires_at__isnull=False)
            ),
            models.Index(
                fields=["tenant", "created_at"], name="memory_tenant_pending", condition=Q(embedding_status="pending")
            ),
            # Full-text matches within one tenant's scope owners: one key per (tenant, owner,
            # lexeme), the lexemes of a tsvector so that any combination of terms is answered in
            # the index, read by memory_lexical_matches() (migrations 0009, 0016). No pending
            # list: every search would scan it whole until a vacuum merged it.
            GinIndex(
                Func(
                    F("tenant"),
                    F("owner_key"),
                    F("search_vector"),
                    function="memory_owner_lexeme_tsv",
                    output_field=SearchVectorField(),
                ),
                name="memory_owner_lexemes",
                fastupdate=False,
            ),
            # A scope owner's newest memories of a kind, without reading the rest of the scope.
            models.Index(
                fields=["tenant", "owner_key", "kind", "-occurred_at", "-created_at"], name="memory_owner_kind_occurred"
            ),
            # A scope owner's memories that expire (a session's): with the index above, a lower
            # bound of a large scope's size read from indexes alone (retrieval.candidates).
            models.Index(
                fields=["tenant", "owner_key"], name="memory_owner_expiring", condition=Q(expires_at__isnull=False)
            ),
            # The turns that follow a memory: what its deletion sets to null (migration 0020).
            models.Index(
                fields=["thread_previous"], name="memory_thread_previous", condition=Q(thread_previous__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"{self.kind} {self.id}"


class ReviewQueueMemory(Memory):
    """Raw memories waiting for a human (raw → validated), as the admin's review queue."""

    class Meta:
        proxy = True
        verbose_name = "memory awaiting review"
        verbose_name_plural = "memories awaiting review"


class Supersession(models.Model):
    """``new`` replaces ``old`` wholly, or in part when ``partial``. Status is derived from these."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    old = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="superseded_by_links")
    new = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="supersedes_links")
    partial = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["old", "new"], name="supersession_unique"),
            models.CheckConstraint(condition=~Q(old=models.F("new")), name="supersession_not_self"),
        ]
        indexes = [models.Index(fields=["tenant", "old"], name="supersession_tenant_old")]

    def __str__(self) -> str:
        return f"{self.new_id} {'partially ' if self.partial else ''}supersedes {self.old_id}"


class MemoryEmbedding(models.Model):
    """The vector of one memory in one model's space. Several models coexist while re-indexing.

    Vectors of different dimensions share the column; each model has its own partial HNSW index
    on ``embedding::vector(<dimension>)`` (see the migrations), and queries name the model.
    """

    pk = models.CompositePrimaryKey("memory_id", "model")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="embeddings")
    model = models.CharField(max_length=64)
    embedding = VectorField()
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "model"], name="embedding_tenant_model")]

    def __str__(self) -> str:
        return f"{self.memory_id} @ {self.model}"


# A btree entry holds at most ~2.7 kB: a halfvec of this many dimensions, with its keys, fits.
SCOPE_VECTOR_MAX_DIMENSION = 1024


class ScopeVector(models.Model):
    """A memory's vector filed under its scope owner, so that one scope's vectors are one index range.

    Derived data, kept by the database: a trigger on ``MemoryEmbedding`` inserts the row (the
    vector as ``halfvec``, for models of up to ``SCOPE_VECTOR_MAX_DIMENSION`` dimensions) and a
    foreign key on (memory_id, model) deletes it with its embedding (migration 0005). The index
    ``(tenant, model, owner_key) INCLUDE (memory_id, embedding)`` gives the exact k-NN of a scope
    from the index alone; the memory table's pages are read only for the winners
    (``retrieval.candidates``). A memory's scope owner never changes, so neither does its key.
    """

    pk = models.CompositePrimaryKey("memory_id", "model")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    # The database deletes the row with its MemoryEmbedding (composite foreign key, migration 0005).
    memory = models.ForeignKey(Memory, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    model = models.CharField(max_length=64)
    owner_key = models.CharField(max_length=160)
    embedding = HalfVectorField()

    objects = TenantQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(
                fields=["tenant", "model", "owner_key"], include=["memory", "embedding"], name="scope_vector_owner"
            ),
            # The same keys alone (deduplicated: ~10 MB at 1M vectors): counts a scope's vectors
            # without reading them, so the k-NN needs no materialised copy of the range to count.
            models.Index(fields=["tenant", "model", "owner_key"], name="scope_vector_owner_rows"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} @ {self.model} in {self.owner_key}"


class OwnerLexicalStats(models.Model):
    """How many memories a scope owner holds and how many terms they hold in all: the corpus size
    and average document length that BM25 needs (``retrieval.candidates``), read in one row per
    owner instead of counting the owner's memories at every search.

    Derived data, kept by the database: statement-level triggers on ``Memory`` add what a statement
    inserted and subtract what it deleted or changed, whoever writes (migration 0010); a row whose
    owner has no memory left is deleted with the last one. No foreign key: the rows come and go
    with the memories, in whatever order a deletion removes them.
    """

    pk = models.CompositePrimaryKey("tenant_id", "owner_key")
    tenant = models.ForeignKey(Tenant, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    owner_key = models.CharField(max_length=160)
    documents = models.BigIntegerField()
    terms = models.BigIntegerField()

    objects = TenantQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.owner_key}: {self.documents} memories, {self.terms} terms"


class OwnerLexemeStats(models.Model):
    """How many of a scope owner's memories hold a lexeme: the document counts of BM25's IDFs
    (``retrieval.candidates``), read for a query's terms instead of counted at every search.

    Derived data, kept by the database like ``OwnerLexicalStats``: statement-level triggers on
    ``Memory`` add the lexemes of what a statement inserted and subtract those of what it deleted or
    whose document it changed (migration 0016); a count that reaches zero is deleted.
    """

    pk = models.CompositePrimaryKey("tenant_id", "owner_key", "lexeme")
    tenant = models.ForeignKey(Tenant, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    owner_key = models.CharField(max_length=160)
    lexeme = models.TextField()
    documents = models.BigIntegerField()

    objects = TenantQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.owner_key} / {self.lexeme}: {self.documents} memories"


class ActivityLog(models.Model):
    """One search or write: masked query and filters, hits, best distances, latency."""

    class Operation(models.TextChoices):
        SEARCH = "search"
        WRITE = "write"

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    operation = models.CharField(max_length=16, choices=Operation.choices)
    client = models.CharField(max_length=50, blank=True, default="")
    user = models.CharField(max_length=128, blank=True, default="")
    query = models.TextField(blank=True, default="")
    filters = models.JSONField(default=dict, blank=True)
    hit_count = models.IntegerField(default=0)
    best_distance = models.JSONField(default=dict, blank=True)
    latency_ms = models.FloatField(default=0)
    solved_query = models.TextField(blank=True, default="")
    degraded = models.BooleanField(default=False)
    memory_ids = ArrayField(models.UUIDField(), default=list, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        verbose_name = "activity log entry"
        verbose_name_plural = "activity log entries"
        indexes = [models.Index(fields=["tenant", "-at"], name="activity_tenant_at")]

    def __str__(self) -> str:
        return f"{self.operation} {self.at:%Y-%m-%d %H:%M}"
