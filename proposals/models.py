"""AGENTS.md documents, their versions, and the proposals agents file against them.

Agents never edit a document: they file a ``Proposal``; a human approves it in the admin, which
creates a new ``AgentsDocumentVersion``. Every version is kept, with who made it and from which
proposal. Rejected proposals stay on record.
"""

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from tenants.models import Tenant, TenantQuerySet


class AgentsDocument(models.Model):
    """The AGENTS.md of one repository. Its row is the lock that serialises every new version."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    repository = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        verbose_name = "AGENTS.md document"
        constraints = [models.UniqueConstraint(fields=["tenant", "repository"], name="agents_document_repository")]

    def __str__(self) -> str:
        return f"{self.repository}/AGENTS.md"


class VersionSource(models.TextChoices):
    IMPORTED = "imported"
    APPROVED = "approved", "approved proposal"


class AgentsDocumentVersion(models.Model):
    """One immutable version of a repository's AGENTS.md (text masked like every free text)."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    document = models.ForeignKey(AgentsDocument, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    source = models.CharField(max_length=16, choices=VersionSource.choices)
    proposal = models.ForeignKey("Proposal", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    created_by = models.CharField(max_length=200, help_text="token:<prefix>:<client> or admin:<username>")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        verbose_name = "AGENTS.md version"
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="agents_version_number")]
        indexes = [models.Index(fields=["tenant", "document", "-number"], name="agents_version_latest")]

    def __str__(self) -> str:
        return f"{self.document.repository}/AGENTS.md v{self.number}"

    @property
    def etag(self) -> str:
        """A strong entity tag: changes whenever the text does."""
        return f'"{self.sha256[:32]}"'


class ProposalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class Proposal(models.Model):
    """An agent's proposed addition to a repository's AGENTS.md, waiting for a human.

    Free text (section, addition, reasoning) is masked before it is stored. Filing the same
    addition again while it is pending merges into this row (``filed_count``, ``filer_tokens``).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    repository = models.CharField(max_length=128)
    section = models.CharField(max_length=200)
    addition = models.TextField()
    reasoning = models.TextField()
    addition_key = models.CharField(max_length=64, help_text="tenant-keyed HMAC of the normalised addition")
    status = models.CharField(max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.PENDING)
    filed_by = models.CharField(max_length=200)
    filer_tokens = ArrayField(models.CharField(max_length=16), default=list, blank=True, help_text="token prefixes")
    filed_count = models.PositiveIntegerField(default=1)
    pii = models.JSONField("PII masked", default=dict, blank=True, help_text="masked values per entity type")
    masker_version = models.CharField(max_length=32, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, default="")
    decision_note = models.TextField(blank=True, default="")
    version = models.ForeignKey(
        AgentsDocumentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "repository", "addition_key"],
                condition=Q(status="pending"),
                name="proposal_pending_once",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "status", "repository", "created_at"], name="proposal_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.repository}: {self.section}"
