"""Memories in the admin: read-only (writes go through the API and the review workflow)."""

from django.contrib import admin
from django.utils.text import Truncator

from memory_service.memories.models import Memory
from tenants.admin_site import ReadOnlyAdmin


@admin.register(Memory)
class MemoryAdmin(ReadOnlyAdmin):
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
