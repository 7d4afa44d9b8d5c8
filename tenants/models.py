import uuid
from datetime import timedelta
from typing import Self, TypeVar

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager


class Permission(models.TextChoices):
    """What a token may do. README, "Tenants, tokens and administrators", lists what each allows."""

    MEMORY_READ = "memory:read"
    MEMORY_WRITE = "memory:write"
    PROPOSALS_WRITE = "proposals:write"
    EXPORT = "export"
    ADMIN = "admin"


DEFAULT_TOKEN_PERMISSIONS = [Permission.MEMORY_READ.value, Permission.MEMORY_WRITE.value]


_Row = TypeVar("_Row", bound=models.Model)


class TenantQuerySet(models.QuerySet[_Row]):
    def for_tenant(self, tenant: "Tenant | uuid.UUID | str") -> Self:
        """Rows of one tenant (given as the tenant or its id). RLS filters too; this keeps queries
        explicit and index-friendly."""
        return self.filter(tenant=tenant)


class PiiMode(models.TextChoices):
    LABEL = "label", "label (<EMAIL_ADDRESS>)"
    PSEUDONYM = "pseudonym", "keyed pseudonym (<EMAIL_ADDRESS_1a2b3c4d5e6f>)"


def default_pii_mode() -> str:
    """The masking mode of a new tenant: keyed pseudonyms when the deployment has a pseudonym key
    (``PII_PSEUDONYM_KEYS``; ``make run`` writes one), labels otherwise.

    With pseudonyms the same name in a note and in a search query masks to the same
    ``<PERSON_…>``, so "what did Ines say about the boat" still finds Ines's notes, while no name
    is stored (bench/RESULTS.md, "Retrieval quality", names as pseudonyms).
    """
    return PiiMode.PSEUDONYM.value if settings.PII_PSEUDONYM_KEYS.strip() else PiiMode.LABEL.value


class Tenant(models.Model):
    """A customer organisation. Deactivated, never deleted, while its audit must be kept.

    The PII policy says how masked values are replaced (``default_pii_mode``), which entity types
    are masked (empty = all the process can detect; secrets always) and whether the NER tier is
    required.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    pii_mode = models.CharField(max_length=16, choices=PiiMode.choices, default=default_pii_mode)
    pii_entities = ArrayField(models.CharField(max_length=32), blank=True, default=list)
    pii_require_ner = models.BooleanField(default=False)
    # Retention (empty = the settings' default of the same name, upper-cased).
    session_ttl_hours = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    export_retention_hours = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    activity_retention_days = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def session_ttl(self) -> timedelta:
        """How long session memories live after their last write."""
        hours = self.session_ttl_hours if self.session_ttl_hours is not None else settings.SESSION_TTL_HOURS
        return timedelta(hours=hours)

    @property
    def export_retention(self) -> timedelta:
        """How long an export archive can be downloaded before it is deleted."""
        hours = self.export_retention_hours
        return timedelta(hours=hours if hours is not None else settings.EXPORT_RETENTION_HOURS)

    @property
    def activity_retention(self) -> timedelta:
        """How long activity rows (search and write analytics) are kept."""
        days = self.activity_retention_days
        return timedelta(days=days if days is not None else settings.ACTIVITY_RETENTION_DAYS)


class ApiTokenManager(BaseAPIKeyManager.from_queryset(TenantQuerySet)):
    pass


class ApiToken(AbstractAPIKey):
    """A bearer token for one client of one tenant, stored hashed with a lookup prefix.

    The raw token (``<prefix>.<secret>``) is shown once at creation. ``user`` binds the token to
    one user id; ``repositories`` (empty = any) binds it to repositories.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="tokens")
    permissions = ArrayField(models.CharField(max_length=32, choices=Permission.choices))
    user = models.CharField(max_length=128, blank=True, default="")
    repositories = ArrayField(models.CharField(max_length=128), blank=True, default=list)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenManager()

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API token"
        verbose_name_plural = "API tokens"
        indexes = [models.Index(fields=["tenant", "name"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    def has_permission(self, permission: str) -> bool:
        return permission in self.permissions


class User(AbstractUser):
    """A person who logs into the Django admin.

    Superusers are platform operators and see every tenant. A staff user bound to a tenant is
    that tenant's administrator: every admin request runs with that tenant set for RLS.
    """

    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="administrators")
