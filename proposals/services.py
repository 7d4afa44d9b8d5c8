"""Every write to AGENTS.md documents and proposals: import, file, approve, reject.

Each service masks free text before it is stored, runs in the tenant's context (RLS applies)
and records its audit event in the same transaction. New versions of one repository's document
are serialised on its ``AgentsDocument`` row, so concurrent approvals and imports never fork it.
"""

import hashlib
import hmac
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import date

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.models import Action
from audit.services import audit_event_record
from memory_service.exceptions import (
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    PreconditionRequiredError,
    ValidationError,
)
from memory_service.inputs import check_storable
from proposals.markdown import insert_addition, parse_section, validate_addition
from proposals.models import AgentsDocument, AgentsDocumentVersion, Proposal, ProposalStatus, VersionSource
from proposals.selectors import agents_md_latest
from tenants.access import Principal, check_repository
from tenants.context import tenant_context
from tenants.identifiers import validate_identifier
from tenants.masking import mask_fields, masker_version
from tenants.models import Tenant
from tenants.services import actor_of

MAX_AGENTS_MD_BYTES = 64 * 1024  # after masking
MAX_REASONING_CHARS = 4000
MAX_NOTE_CHARS = 2000


@dataclass
class AgentsMdWriteResult:
    """The current version after an import; ``created`` is False when the text was already current."""

    version: AgentsDocumentVersion
    created: bool
    pii: dict[str, int] = field(default_factory=dict)


@dataclass
class ProposalFileResult:
    """The proposal; ``created`` is False when the addition merged into a pending duplicate. Its
    ``shown_reasoning`` is the filer's own (masked) reasoning, never an earlier filer's."""

    proposal: Proposal
    created: bool
    pii: dict[str, int] = field(default_factory=dict)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _locked_document(*, tenant: Tenant, repository: str) -> AgentsDocument:
    """The repository's document row, created if needed, locked until the transaction ends."""
    try:
        with transaction.atomic():
            AgentsDocument.objects.get_or_create(tenant=tenant, repository=repository)
    except IntegrityError:
        pass  # created concurrently: it exists now
    return AgentsDocument.objects.for_tenant(tenant).select_for_update().get(repository=repository)


def _check_if_match(current: AgentsDocumentVersion | None, if_match: str | None) -> None:
    """HTTP ``If-Match`` semantics (strong comparison): a lost update is refused, never applied."""
    if if_match is None:
        if current is not None:
            raise PreconditionRequiredError(
                "This repository already has an AGENTS.md: send If-Match with its current ETag.",
                fields={"If-Match": ["Required when a document exists."]},
            )
        return
    tags = [tag.strip() for tag in if_match.split(",") if tag.strip()]
    if current is None or ("*" not in tags and current.etag not in tags):
        raise PreconditionFailedError(
            "AGENTS.md changed since that ETag: fetch the current version and retry.",
            fields={"If-Match": ["Does not match the current ETag."]},
        )


def _new_version(
    *,
    document: AgentsDocument,
    current: AgentsDocumentVersion | None,
    text: str,
    source: str,
    actor: str,
    proposal: Proposal | None = None,
) -> AgentsDocumentVersion:
    return AgentsDocumentVersion.objects.create(
        tenant_id=document.tenant_id,
        document=document,
        number=(current.number + 1) if current else 1,
        text=text,
        sha256=_sha256(text),
        source=source,
        proposal=proposal,
        created_by=actor,
    )


def agents_md_import(
    *, tenant: Tenant, actor: str, repository: str, text: str, if_match: str | None, principal: Principal | None = None
) -> AgentsMdWriteResult:
    """Store ``text`` (masked) as the repository's current AGENTS.md, if ``if_match`` still holds.

    Without ``if_match`` only a repository with no document yet may be written (428 otherwise);
    a stale ETag is a 412. Text identical to the current version creates nothing. ``token`` (an
    import over the API) must be allowed the repository.
    """
    validate_identifier(repository, field="repository")
    if principal is not None:
        check_repository(principal, repository)
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("The AGENTS.md body must not be empty.", fields={"text": ["Required."]})
    if len(text.encode()) > 4 * MAX_AGENTS_MD_BYTES:
        raise PayloadTooLargeError(
            f"AGENTS.md exceeds {MAX_AGENTS_MD_BYTES} bytes.",
            fields={"text": [f"At most {MAX_AGENTS_MD_BYTES} bytes."]},
        )
    masked = mask_fields(tenant=tenant, fields={"text": text})
    text = masked.values["text"]
    if len(text.encode()) > MAX_AGENTS_MD_BYTES:
        raise PayloadTooLargeError(
            f"AGENTS.md exceeds {MAX_AGENTS_MD_BYTES} bytes after masking.",
            fields={"text": [f"At most {MAX_AGENTS_MD_BYTES} bytes."]},
        )
    with tenant_context(tenant.id):
        document = _locked_document(tenant=tenant, repository=repository)
        current = agents_md_latest(tenant=tenant, document=document)
        _check_if_match(current, if_match)
        if current is not None and current.sha256 == _sha256(text):
            return AgentsMdWriteResult(version=current, created=False, pii=masked.counts)
        version = _new_version(
            document=document, current=current, text=text, source=VersionSource.IMPORTED, actor=actor
        )
        audit_event_record(
            tenant=tenant,
            actor=actor,
            action=Action.AGENTS_MD_IMPORTED,
            resource_type="agents_md",
            resource_ids=[version.id],
            details={"repository": repository, "version": version.number, "bytes": len(text.encode()),
                     "pii": masked.counts},
        )  # fmt: skip
    return AgentsMdWriteResult(version=version, created=True, pii=masked.counts)


def _addition_key(tenant: Tenant, addition: str) -> str:
    """A tenant-keyed HMAC of the addition, ignoring case, width, spacing and a leading bullet."""
    normal = " ".join(unicodedata.normalize("NFKC", addition).casefold().split()).lstrip("-*+ ")
    key = hmac.new(settings.SECRET_KEY.encode(), f"proposal|{tenant.id}".encode(), hashlib.sha256).digest()
    return hmac.new(key, normal.encode(), hashlib.sha256).hexdigest()


def _merge_into_pending(*, principal: Principal, repository: str, key: str) -> Proposal | None:
    proposal = (
        Proposal.objects.for_tenant(principal.tenant)
        .select_for_update()
        .filter(repository=repository, addition_key=key, status=ProposalStatus.PENDING)
        .first()
    )
    if proposal is not None:
        proposal.filed_count += 1
        if principal.prefix not in proposal.filer_tokens:
            proposal.filer_tokens = [*proposal.filer_tokens, principal.prefix]
        proposal.save(update_fields=["filed_count", "filer_tokens", "updated_at"])
    return proposal


def proposal_file(
    *, principal: Principal, repository: str, section: str, addition: str, reasoning: str
) -> ProposalFileResult:
    """File a proposed addition to a repository's AGENTS.md; it waits for a human as ``pending``.

    The same addition filed again while pending merges into the existing proposal (``created``
    False). Section, addition and reasoning are masked before anything is stored.
    """
    validate_identifier(repository, field="repository")
    check_repository(principal, repository)
    parse_section(section)
    addition = validate_addition(addition)
    if not isinstance(reasoning, str) or not reasoning.strip():
        raise ValidationError("'reasoning' is required.", fields={"reasoning": ["Required."]})
    if len(reasoning) > MAX_REASONING_CHARS:
        raise ValidationError(
            f"'reasoning' exceeds {MAX_REASONING_CHARS} characters.", fields={"reasoning": ["Too long."]}
        )
    check_storable({"section": section, "addition": addition, "reasoning": reasoning})  # before hashing
    key = _addition_key(principal.tenant, addition)
    masked = mask_fields(
        tenant=principal.tenant, fields={"section": section, "addition": addition, "reasoning": reasoning}
    )
    with tenant_context(principal.tenant_id):
        proposal = _merge_into_pending(principal=principal, repository=repository, key=key)
        created = proposal is None
        if created:
            try:
                with transaction.atomic():
                    proposal = Proposal.objects.create(
                        tenant=principal.tenant,
                        repository=repository,
                        section=str(parse_section(masked.values["section"])),
                        addition=masked.values["addition"],
                        reasoning=masked.values["reasoning"].strip(),
                        addition_key=key,
                        filed_by=actor_of(principal),
                        filer_tokens=[principal.prefix],
                        pii=masked.counts,
                        masker_version=masker_version(),
                    )
            except IntegrityError:  # the same addition was filed concurrently
                proposal, created = _merge_into_pending(principal=principal, repository=repository, key=key), False
        if proposal is None:  # filed concurrently and already decided
            raise ConflictError("The same addition was just filed and decided; file it again.")
        audit_event_record(
            tenant=principal.tenant,
            actor=actor_of(principal),
            action=Action.PROPOSAL_FILED,
            resource_type="proposal",
            resource_ids=[proposal.id],
            details={"repository": repository, "merged": not created, "pii": masked.counts},
        )
    # What ``proposal_list`` annotates for a reader; the filer may see its own reasoning.
    proposal.shown_reasoning = masked.values["reasoning"].strip()  # type: ignore[attr-defined]
    return ProposalFileResult(proposal=proposal, created=created, pii=masked.counts)


def _pending_for_decision(*, tenant: Tenant, proposal_id: uuid.UUID | str) -> Proposal:
    proposal = Proposal.objects.for_tenant(tenant).select_for_update().filter(id=proposal_id).first()
    if proposal is None:
        raise NotFoundError("No such proposal.")
    if proposal.status != ProposalStatus.PENDING:
        raise ConflictError(
            f"This proposal was already {proposal.status} by {proposal.decided_by or 'someone'}.",
            fields={"status": [proposal.status]},
        )
    return proposal


def proposal_approve(*, tenant: Tenant, actor: str, proposal_id: uuid.UUID | str, on: date | None = None) -> Proposal:
    """Approve a pending proposal: its addition goes under its section (created if missing),
    marked 🤖 with the date, as a new version of the document. A decided proposal is a 409.

    The proposal row is locked first, then the document: of two concurrent approvals of one
    proposal exactly one creates a version; the other sees it decided.
    """
    with tenant_context(tenant.id):
        proposal = _pending_for_decision(tenant=tenant, proposal_id=proposal_id)
        document = _locked_document(tenant=tenant, repository=proposal.repository)
        current = agents_md_latest(tenant=tenant, document=document)
        text = insert_addition(
            current.text if current else "",
            section=parse_section(proposal.section),
            addition=proposal.addition,
            on=on or timezone.localdate(),
        )
        version = _new_version(
            document=document, current=current, text=text, source=VersionSource.APPROVED, actor=actor, proposal=proposal
        )
        proposal.status = ProposalStatus.APPROVED
        proposal.decided_at = timezone.now()
        proposal.decided_by = actor
        proposal.version = version
        proposal.save(update_fields=["status", "decided_at", "decided_by", "version", "updated_at"])
        audit_event_record(
            tenant=tenant,
            actor=actor,
            action=Action.PROPOSAL_APPROVED,
            resource_type="proposal",
            resource_ids=[proposal.id],
            details={"repository": proposal.repository, "version": version.number, "version_id": version.id},
        )
    return proposal


def proposal_reject(*, tenant: Tenant, actor: str, proposal_id: uuid.UUID | str, note: str) -> Proposal:
    """Reject a pending proposal with a note for the agent (masked). It stays on record."""
    if not isinstance(note, str) or not note.strip():
        raise ValidationError("A rejection needs a note.", fields={"note": ["Required."]})
    if len(note) > MAX_NOTE_CHARS:
        raise ValidationError(f"'note' exceeds {MAX_NOTE_CHARS} characters.", fields={"note": ["Too long."]})
    masked = mask_fields(tenant=tenant, fields={"note": note.strip()})
    with tenant_context(tenant.id):
        proposal = _pending_for_decision(tenant=tenant, proposal_id=proposal_id)
        proposal.status = ProposalStatus.REJECTED
        proposal.decided_at = timezone.now()
        proposal.decided_by = actor
        proposal.decision_note = masked.values["note"]
        proposal.save(update_fields=["status", "decided_at", "decided_by", "decision_note", "updated_at"])
        audit_event_record(
            tenant=tenant,
            actor=actor,
            action=Action.PROPOSAL_REJECTED,
            resource_type="proposal",
            resource_ids=[proposal.id],
            details={"repository": proposal.repository, "pii": masked.counts},
        )
    return proposal
