"""Memories in the admin: read-only, and the review queue (promote or reject raw memories)."""

from django.contrib import admin, messages
from django.db.models import Case, Value, When
from django.utils.text import Truncator

from memory_service.exceptions import ConflictError
from memory_service.memories.models import Confidence, Memory, Priority, ReviewQueueMemory, Scope
from memory_service.memories.services import memory_promote, memory_reject
from tenants.admin_site import ReadAuditedAdmin
from tenants.services import admin_actor


@admin.register(Memory)
class MemoryAdmin(ReadAuditedAdmin):
    """Memories, read-only; every list and detail page shown is audited as a read."""

    audit_resource_type = "memory"
    list_display = ["created_at", "kind", "scope", "owner", "excerpt", "priority", "confidence", "embedding_status"]
    list_filter = ["kind", "scope", "confidence", "priority", "embedding_status"]
    search_fields = ["title", "text", "repository", "user", "session", "external_id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    exclude = ["search_vector", "dedup_key", "request_hash"]
    list_per_page = 50

    def get_queryset(self, request):
        return super().get_queryset(request).defer("search_vector")

    @admin.display(description="owner")
    def owner(self, memory):
        return {"user": memory.user, "repository": memory.repository}.get(memory.scope, memory.session)

    @admin.display(description="memory")
    def excerpt(self, memory):
        return Truncator(f"{memory.title}: {memory.text}" if memory.title else memory.text).chars(120)


@admin.register(ReviewQueueMemory)
class ReviewQueueAdmin(MemoryAdmin):
    """Raw memories for a human to promote (validated) or reject (deleted).

    High-priority repository memories come first: they pin into every agent's context only once
    validated. The actions call the same services as the API, so the audit records each decision.
    """

    list_display = ["created_at", "pins_when_validated", "kind", "scope", "owner", "excerpt", "priority"]
    list_filter = ["kind", "scope", "priority"]
    actions = ["promote_selected", "reject_selected"]

    def get_queryset(self, request):
        first = Case(
            When(priority=Priority.HIGH, scope=Scope.REPOSITORY, then=Value(0)),
            When(priority=Priority.HIGH, then=Value(1)),
            default=Value(2),
        )
        # Annotated before the admin orders by it (ModelAdmin.get_queryset would order first).
        queryset = self.model._default_manager.get_queryset().defer("search_vector")
        return queryset.filter(confidence=Confidence.RAW).annotate(review_rank=first)

    def get_ordering(self, request):
        return ["review_rank", "-created_at"]

    def has_change_permission(self, request, obj=None):
        # Needed for the actions; every field stays read-only.
        return self.admin_site.has_permission(request)

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
        self.message_user(request, f"Promoted {len(memories)} memory(ies) to validated.", messages.SUCCESS)

    @admin.action(description="Reject (delete) selected memories")
    def reject_selected(self, request, queryset):
        rejected, skipped = 0, 0
        for memory in list(queryset):
            try:
                memory_reject(tenant=memory.tenant, actor=admin_actor(request.user), memory=memory)
                rejected += 1
            except ConflictError:
                skipped += 1
        self.message_user(request, f"Rejected {rejected} memory(ies).", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} were already reviewed by someone else.", messages.WARNING)
