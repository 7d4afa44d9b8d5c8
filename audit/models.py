from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from tenants.models import Tenant, TenantQuerySet


class Action(models.TextChoices):
    """The one list of audited actions (DESIGN.md, REST API)."""

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


class AuditEvent(models.Model):
    """One audited action. Append-only; each tenant's events form an HMAC chain by ``seq``.

    Never holds memory text, queries or PII: ids, sizes and counts only; user ids only as keyed
    pseudonyms.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    seq = models.BigIntegerField()
    at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=32, choices=Action.choices)
    resource_type = models.CharField(max_length=32)
    resource_ids = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="audit_event_tenant_seq")]
        indexes = [
            models.Index(fields=["tenant", "-at"], name="audit_tenant_at"),
            models.Index(fields=["tenant", "action", "-at"], name="audit_tenant_action_at"),
        ]

    def __str__(self) -> str:
        return f"{self.action} #{self.seq}"
