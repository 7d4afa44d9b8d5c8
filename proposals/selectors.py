"""Every read of AGENTS.md documents and proposals. Queries start from ``for_tenant``."""

import uuid
from datetime import date

from django.db.models import Case, F, QuerySet, TextField, Value, When
from django.utils import timezone

from audit.services import audit_read_record
from memory_service.exceptions import NotFoundError, ValidationError
from proposals.markdown import DiffLine, diff_lines, insert_addition, parse_section
from proposals.models import AgentsDocument, AgentsDocumentVersion, Proposal
from tenants.access import Principal, check_repository
from tenants.identifiers import validate_identifier
from tenants.models import Permission, Tenant


def agents_document_get(*, document_id: str) -> AgentsDocument | None:
    """The AGENTS.md document with this id in the caller's context, or None (also for a malformed id)."""
    if not str(document_id).isdigit():
        return None
    return AgentsDocument.objects.filter(pk=int(document_id)).first()


def agents_md_latest(*, tenant: Tenant, document: AgentsDocument) -> AgentsDocumentVersion | None:
    """The newest version of ``document``, or None before the first."""
    return AgentsDocumentVersion.objects.for_tenant(tenant).filter(document=document).order_by("-number").first()


def agents_md_current(*, principal: Principal, repository: str) -> AgentsDocumentVersion:
    """The current AGENTS.md of a repository the token may touch, its read audited; NotFoundError
    if it has none."""
    validate_identifier(repository, field="repository")
    check_repository(principal, repository)
    version = (
        AgentsDocumentVersion.objects.for_tenant(principal.tenant)
        .filter(document__repository=repository)
        .select_related("document")
        .order_by("-number")
        .first()
    )
    if version is None:
        raise NotFoundError("This repository has no AGENTS.md yet.")
    audit_read_record(principal=principal, resource_type="agents_md", resource_ids=[version.id],
                      details={"version": version.number})  # fmt: skip
    return version


def agents_md_versions(*, tenant: Tenant, repository: str) -> QuerySet[AgentsDocumentVersion]:
    """Every version of a repository's AGENTS.md, newest first."""
    return (
        AgentsDocumentVersion.objects.for_tenant(tenant)
        .filter(document__repository=repository)
        .select_related("document")
        .order_by("-number")
    )


def proposal_list(*, principal: Principal, filters: dict) -> QuerySet[Proposal]:
    """Proposals the token filed (every proposal of the tenant for an ``admin`` token), newest first.

    ``filters`` may hold repository and status. Each row's ``shown_reasoning`` is its reasoning
    for an ``admin`` token or the proposal's first filer, and empty for a token whose filing merged
    into it: one filer never reads another's reasoning.
    """
    check_repository(principal, filters.get("repository"))
    queryset = Proposal.objects.for_tenant(principal.tenant)
    if not principal.has_permission(Permission.ADMIN):
        queryset = queryset.filter(filer_tokens__contains=[principal.prefix])
    if principal.repositories:
        queryset = queryset.filter(repository__in=principal.repositories)
    for name in ("repository", "status"):
        if filters.get(name):
            queryset = queryset.filter(**{name: filters[name]})
    shown: F | Case
    if principal.has_permission(Permission.ADMIN):
        shown = F("reasoning")
    else:
        shown = Case(
            When(filer_tokens__0=principal.prefix, then=F("reasoning")), default=Value(""), output_field=TextField()
        )
    return queryset.annotate(shown_reasoning=shown).order_by("-created_at", "-id")


def proposal_get(*, principal: Principal, proposal_id: uuid.UUID | str) -> Proposal:
    """A proposal the token may list, its read audited; NotFoundError if missing, another tenant's
    or not its own."""
    try:
        proposal_id = uuid.UUID(str(proposal_id))
    except ValueError as exc:
        raise ValidationError("'id' is not a valid proposal id.", fields={"id": ["Not a UUID."]}) from exc
    proposal = proposal_list(principal=principal, filters={}).filter(id=proposal_id).first()
    if proposal is None:
        raise NotFoundError("No such proposal.")
    audit_read_record(principal=principal, resource_type="proposal", resource_ids=[proposal.id])
    return proposal


def proposal_preview(*, proposal: Proposal, on: date | None = None) -> tuple[str, str, list[DiffLine]]:
    """AGENTS.md before and after approving ``proposal`` now (or, once approved, around the version
    it produced), and the diff between them. Runs in the caller's tenant context; writes nothing.
    """
    after_version = proposal.version
    if after_version is not None:
        before_version = (
            AgentsDocumentVersion.objects.for_tenant(proposal.tenant)
            .filter(document_id=after_version.document_id, number=after_version.number - 1)
            .first()
        )
        before = before_version.text if before_version else ""
        return before, after_version.text, diff_lines(before, after_version.text)
    document = AgentsDocument.objects.for_tenant(proposal.tenant).filter(repository=proposal.repository).first()
    current = agents_md_latest(tenant=proposal.tenant, document=document) if document else None
    before = current.text if current else ""
    after = insert_addition(
        before, section=parse_section(proposal.section), addition=proposal.addition, on=on or timezone.localdate()
    )
    return before, after, diff_lines(before, after)
