import uuid
from typing import Self

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone

from tenants.models import Tenant, TenantQuerySet


class Action(models.TextChoices):
    """The one list of audited actions (README, "The audit trail")."""

    OFFLOAD = "offload"
    RETRIEVE = "retrieve"
    UPDATE = "update"
    DELETE = "delete"
    SUPERSEDE = "supersede"
    PROMOTE = "promote"
    PROPOSAL_FILED = "proposal_filed"
    PROPOSAL_APPROVED = "proposal_approved"
    PROPOSAL_REJECTED = "proposal_rejected"
    AGENTS_MD_IMPORTED = "agents_md_imported"
    EXPORT_STARTED = "export_started"
    EXPORT_FINISHED = "export_finished"
    EXPORT_DOWNLOADED = "export_downloaded"
    AUDIT_EXPORTED = "audit_exported"
    ERASE = "erase"
    PURGE = "purge"
    TOKEN_CREATED = "token_created"
    TOKEN_REVOKED = "token_revoked"


class AuditEventQuerySet(TenantQuerySet["AuditEvent"]):
    def for_tenant(self, tenant: Tenant | uuid.UUID | str) -> Self:
        return self.filter(tenant_id=tenant.id if isinstance(tenant, Tenant) else tenant)


class AuditEvent(models.Model):
    """One audited action. Append-only; each tenant's events form an HMAC chain by ``seq``.

    Never holds memory text, queries or PII: ids, sizes and counts only; user ids only as keyed
    pseudonyms. ``tenant_id`` is deliberately not a foreign key: the record outlives anything it
    refers to, and nothing done to tenants may ever require touching it.
    """

    id = models.BigAutoField(primary_key=True)
    tenant_id = models.UUIDField()
    seq = models.BigIntegerField()
    at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=32, choices=Action.choices)
    resource_type = models.CharField(max_length=32)
    resource_ids = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant_id", "seq"], name="audit_event_tenant_seq")]
        indexes = [
            models.Index(fields=["tenant_id", "-at"], name="audit_tenant_at"),
            models.Index(fields=["tenant_id", "action", "-at"], name="audit_tenant_action_at"),
            GinIndex(fields=["resource_ids"], name="audit_resource_ids"),
        ]

    def __str__(self) -> str:
        return f"{self.action} #{self.seq}"
