"""Human review of AGENTS.md proposals, and AGENTS.md documents, in the admin.

Pages are read-only; the only writes are Approve, Reject and Import, which call the same services
as the API (masking and audit apply). Tenant administrators see only their tenant's rows: every
admin request runs in their tenant's context (``tenants.admin_site``).
"""

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import Truncator

from memory_service.exceptions import ApplicationError
from proposals.models import AgentsDocument, AgentsDocumentVersion, Proposal, ProposalStatus
from proposals.selectors import agents_document_get, agents_md_latest, proposal_preview
from proposals.services import agents_md_import, proposal_approve, proposal_reject
from tenants.admin_site import DefaultChoiceFilter, ReadOnlyAdmin
from tenants.selectors import tenant_list
from tenants.services import admin_actor


class StatusFilter(DefaultChoiceFilter):
    """Pending proposals unless another status (or all) is chosen: the list is a review queue."""

    title = "status"
    parameter_name = "status"
    default = ProposalStatus.PENDING

    def lookups(self, request, model_admin):
        return [*ProposalStatus.choices, ("all", "All")]

    def queryset(self, request, queryset):
        value = self.value() or self.default
        return queryset if value == "all" else queryset.filter(status=value)


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "repository", "section", "excerpt", "status", "filed_count", "filed_by"]
    list_filter = [StatusFilter, "repository", "tenant"]
    search_fields = ["repository", "section"]
    ordering = ["created_at"]
    list_per_page = 50
    fields = ["tenant", "repository", "section", "addition", "reasoning", "status", "filed_by", "filed_count",
              "created_at", "decided_by", "decided_at", "decision_note", "version", "pii"]  # fmt: skip
    change_form_template = "admin/proposals/proposal/change_form.html"

    @admin.display(description="addition")
    def excerpt(self, proposal):
        return Truncator(proposal.addition).chars(100)

    def get_urls(self):
        return [
            path("<path:object_id>/approve/", self.admin_site.admin_view(self.approve_view), name="proposal_approve"),
            path("<path:object_id>/reject/", self.admin_site.admin_view(self.reject_view), name="proposal_reject"),
        ] + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        proposal = self.get_object(request, object_id)
        if proposal is not None:
            before, after, diff = proposal_preview(proposal=proposal)
            extra_context = (extra_context or {}) | {
                "diff": diff,
                "after": after,
                "is_new_document": not before,
                "can_decide": proposal.status == ProposalStatus.PENDING,
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def _decide(self, request, object_id, decide) -> HttpResponseRedirect:
        proposal = get_object_or_404(self.get_queryset(request), pk=object_id)
        change_url = reverse("admin:proposals_proposal_change", args=[proposal.pk])
        if request.method != "POST":
            return HttpResponseRedirect(change_url)
        try:
            message = decide(proposal)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, message, messages.SUCCESS)
        return HttpResponseRedirect(change_url)

    def approve_view(self, request, object_id):
        def approve(proposal):
            proposal = proposal_approve(
                tenant=proposal.tenant, actor=admin_actor(request.user), proposal_id=proposal.pk
            )
            return f"Approved: {proposal.repository}/AGENTS.md is now version {proposal.version.number}."

        return self._decide(request, object_id, approve)

    def reject_view(self, request, object_id):
        def reject(proposal):
            note = request.POST.get("note", "")
            proposal_reject(tenant=proposal.tenant, actor=admin_actor(request.user), proposal_id=proposal.pk, note=note)
            return "Rejected; the note is on record for the agent."

        return self._decide(request, object_id, reject)


class VersionInline(admin.TabularInline):
    model = AgentsDocumentVersion
    fields = ["number", "source", "proposal", "created_by", "created_at", "sha256"]
    readonly_fields = fields
    ordering = ["-number"]
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ImportForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=tenant_list().none(), required=False)
    repository = forms.RegexField(r"^[A-Za-z0-9._:-]{1,128}$", max_length=128)
    file = forms.FileField(required=False, help_text="AGENTS.md (UTF-8); or paste it below")
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 16, "cols": 100}), required=False, strip=False)
    etag = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        if user.is_superuser:
            self.fields["tenant"].queryset = tenant_list(active_only=True)
            self.fields["tenant"].required = True
        else:
            del self.fields["tenant"]

    def clean(self):
        data = super().clean()
        upload = data.get("file")
        if upload is not None:
            try:
                data["text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("file", "The file is not valid UTF-8.")
        data["text"] = (data.get("text") or "").replace("\r\n", "\n")
        if not data["text"].strip() and not self.errors:
            self.add_error("text", "Upload a file or paste the document.")
        return data


@admin.register(AgentsDocument)
class AgentsDocumentAdmin(ReadOnlyAdmin):
    list_display = ["repository", "tenant", "current_version", "created_at"]
    list_filter = ["tenant"]
    search_fields = ["repository"]
    fields = ["tenant", "repository", "created_at"]
    inlines = [VersionInline]
    change_list_template = "admin/proposals/agentsdocument/change_list.html"

    @admin.display(description="current version")
    def current_version(self, document):
        latest = agents_md_latest(tenant=document.tenant, document=document)
        return latest.number if latest else "—"

    def get_urls(self):
        return [
            path("import/", self.admin_site.admin_view(self.import_view), name="proposals_agentsdocument_import"),
        ] + super().get_urls()

    def import_view(self, request):
        """Upload a repository's AGENTS.md as a new version (If-Match against the version shown)."""
        document_id = request.GET.get("document", "")
        document = agents_document_get(document_id=document_id)
        current = agents_md_latest(tenant=document.tenant, document=document) if document else None
        if request.method == "POST":
            form = ImportForm(request.POST, request.FILES, user=request.user)
            if form.is_valid():
                tenant = form.cleaned_data.get("tenant") or request.user.tenant
                try:
                    result = agents_md_import(
                        tenant=tenant,
                        actor=admin_actor(request.user),
                        repository=form.cleaned_data["repository"],
                        text=form.cleaned_data["text"],
                        if_match=form.cleaned_data["etag"] or None,
                    )
                except ApplicationError as exc:
                    form.add_error(None, exc.message)
                else:
                    self.message_user(
                        request,
                        f"{form.cleaned_data['repository']}/AGENTS.md is at version {result.version.number}"
                        + ("." if result.created else " (unchanged)."),
                        messages.SUCCESS,
                    )
                    return HttpResponseRedirect(reverse("admin:proposals_agentsdocument_changelist"))
        else:
            initial = {
                "tenant": document.tenant_id if document else None,
                "repository": document.repository if document else "",
                "etag": current.etag if current else "",
            }
            form = ImportForm(initial=initial, user=request.user)
        context = self.admin_site.each_context(request) | {
            "title": "Import AGENTS.md",
            "form": form,
            "document": document,
            "current": current,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/proposals/agentsdocument/import.html", context)


@admin.register(AgentsDocumentVersion)
class AgentsDocumentVersionAdmin(ReadOnlyAdmin):
    list_display = ["document", "number", "source", "created_by", "created_at"]
    list_filter = ["source", "tenant"]
    search_fields = ["document__repository"]
    fields = ["tenant", "document", "number", "source", "proposal", "created_by", "created_at", "sha256", "text"]
    ordering = ["-created_at"]
