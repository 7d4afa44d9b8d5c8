"""Memories in the admin: read-only, and the review queue (promote or reject raw memories)."""

from django.contrib import admin, messages
from django.db.models import Case, Count, Q, Value, When
from django.utils.text import Truncator
from django.utils.translation import ngettext

from memory_service.exceptions import ConflictError
from memory_service.memories.models import (
    ActivityLog,
    Confidence,
    Kind,
    Memory,
    Origin,
    Priority,
    ReviewQueueMemory,
    Scope,
)
from memory_service.memories.services import memory_promote, memory_reject
from tenants.admin_site import DefaultChoiceFilter, ReadAuditedAdmin
from tenants.services import admin_actor


@admin.register(Memory)
class MemoryAdmin(ReadAuditedAdmin):
    """Memories, read-only; every list and detail page shown is audited as a read."""

    audit_resource_type = "memory"
    list_display = ["created_at", "kind", "scope", "owner", "excerpt", "priority", "confidence", "embedding_status"]
    list_filter = ["kind", "scope", "confidence", "priority", "origin", "embedding_status"]
    search_fields = ["title", "text", "repository", "user", "session", "external_id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    exclude = ["search_vector", "dedup_key", "request_hash"]
    list_per_page = 50

    class Media:
        css = {"all": ["memories/admin.css"]}

    def get_queryset(self, request):
        return super().get_queryset(request).defer("search_vector")

    @admin.display(description="owner")
    def owner(self, memory):
        return {"user": memory.user, "repository": memory.repository}.get(memory.scope, memory.session)

    @admin.display(description="memory")
    def excerpt(self, memory):
        return Truncator(f"{memory.title}: {memory.text}" if memory.title else memory.text).chars(120)


def _memories(count: int) -> str:
    """``"1 memory"``, ``"3 memories"``."""
    return ngettext("%(count)d memory", "%(count)d memories", count) % {"count": count}


# The review queue's categories of raw memories: (value, label, filter). Bulk writes and session
# notes are left out of the default view; a person can still open them.
REVIEW_CATEGORIES = [
    ("review", "Needs review", Q(origin=Origin.SINGLE)),
    ("session_notes", "Session notes", Q(origin=Origin.SESSION_NOTE)),
    ("bulk", "Bulk writes", Q(origin=Origin.BULK)),
    ("all", "All raw memories", Q(confidence=Confidence.RAW)),
]
# Kinds a person should confirm before agents rely on them.
REVIEWED_KINDS = [Kind.LESSON, Kind.DECISION, Kind.CONCLUSION]


class ReviewCategoryFilter(DefaultChoiceFilter):
    """Raw memories that need a person unless another category is chosen; each label carries
    its category's count of raw memories (of the tenants the viewer may see)."""

    title = "category"
    parameter_name = "show"
    default = REVIEW_CATEGORIES[0][0]

    def lookups(self, request, model_admin):
        counts = model_admin.raw_memories().aggregate(
            **{value: Count("id", filter=condition) for value, _label, condition in REVIEW_CATEGORIES}
        )
        return [(value, f"{label} ({counts[value]})") for value, label, _condition in REVIEW_CATEGORIES]

    def queryset(self, request, queryset):
        conditions = {value: condition for value, _label, condition in REVIEW_CATEGORIES}
        return queryset.filter(conditions.get(self.value(), REVIEW_CATEGORIES[0][2]))


@admin.register(ActivityLog)
class ActivityLogAdmin(ReadAuditedAdmin):
    """Searches and writes as the activity log keeps them (masked queries, pseudonymous users),
    read-only; every page shown is audited as a read, as over the API."""

    audit_resource_type = "activity"
    list_display = ["at", "operation", "client", "user", "query_excerpt", "filters_shown", "hits", "latency"]
    list_filter = ["operation", "degraded", "client"]
    date_hierarchy = "at"
    ordering = ["-at", "-id"]
    list_per_page = 50

    class Media:
        css = {"all": ["memories/admin.css"]}

    @admin.display(description="query")
    def query_excerpt(self, row):
        return Truncator(row.query).chars(120) or None

    @admin.display(description="hits", ordering="hit_count")
    def hits(self, row):
        return row.hit_count

    @admin.display(description="latency (ms)", ordering="latency_ms")
    def latency(self, row):
        return row.latency_ms

    @admin.display(description="filters")
    def filters_shown(self, row):
        return ", ".join(f"{name}: {value}" for name, value in sorted(row.filters.items()) if value) or None


@admin.register(ReviewQueueMemory)
class ReviewQueueAdmin(MemoryAdmin):
    """Raw memories for a human to promote (validated) or reject (deleted).

    First the high-priority repository memories (they pin into every agent's context only once
    validated), then lessons, decisions and conclusions, then the rest, newest first within each.
    Bulk writes and session notes are shown only when asked for (``ReviewCategoryFilter``). The
    actions call the same services as the API, so the audit records each decision.
    """

    list_display = ["created_at", "pins_when_validated", "kind", "scope", "owner", "excerpt", "priority", "origin"]
    list_filter = [ReviewCategoryFilter, "kind", "scope", "priority"]
    actions = ["promote_selected", "reject_selected"]

    def raw_memories(self):
        """Every raw memory the request's context may see (RLS scopes it to the tenant)."""
        return self.model._default_manager.filter(confidence=Confidence.RAW)

    def get_queryset(self, request):
        rank = Case(
            When(priority=Priority.HIGH, scope=Scope.REPOSITORY, then=Value(0)),
            When(kind__in=REVIEWED_KINDS, then=Value(1)),
            default=Value(2),
        )
        # Annotated before the admin orders by it (ModelAdmin.get_queryset would order first).
        return self.raw_memories().annotate(review_rank=rank)

    def get_ordering(self, request):
        return ["review_rank", "-created_at"]

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Review queue", **(extra_context or {})})

    def has_change_permission(self, request, obj=None):
        # The list's actions need it; a memory's own page stays a read-only view.
        return obj is None and self.admin_site.has_permission(request)

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields if f.name not in self.exclude]

    @admin.display(description="pins when validated", boolean=True)
    def pins_when_validated(self, memory):
        return memory.priority == Priority.HIGH and memory.scope == Scope.REPOSITORY

    @admin.action(description="Promote selected memories to validated")
    def promote_selected(self, request, queryset):
        memories = list(queryset)
        for memory in memories:
            memory_promote(tenant=memory.tenant, actor=admin_actor(request.user), memory=memory)
        self.message_user(request, f"Promoted {_memories(len(memories))} to validated.", messages.SUCCESS)

    @admin.action(description="Reject (delete) selected memories")
    def reject_selected(self, request, queryset):
        rejected, skipped = 0, 0
        for memory in list(queryset):
            try:
                memory_reject(tenant=memory.tenant, actor=admin_actor(request.user), memory=memory)
                rejected += 1
            except ConflictError:
                skipped += 1
        self.message_user(request, f"Rejected {_memories(rejected)}.", messages.SUCCESS)
        if skipped:
            already = ngettext("was already reviewed", "were already reviewed", skipped)
            self.message_user(request, f"{_memories(skipped)} {already} by someone else.", messages.WARNING)
