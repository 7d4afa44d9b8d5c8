"""Every write to tenants and tokens goes through these functions."""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.models import Action
from audit.services import audit_event_record, user_pseudonym
from memory_service.exceptions import ConflictError, ValidationError
from tenants.access import Principal, check_token_within, require_permission
from tenants.context import tenant_context
from tenants.identifiers import validate_identifier
from tenants.masking import mask_fields
from tenants.models import DEFAULT_TOKEN_PERMISSIONS, ApiToken, Permission, Tenant, User

_VALID_PERMISSIONS = set(Permission.values)


def actor_of(token: ApiToken | Principal) -> str:
    """How a token (or the principal it makes) appears in the audit: its id (prefix) and client name,
    never its secret."""
    return f"token:{token.prefix}:{token.name}"


def admin_actor(user: User) -> str:
    """How a person using the admin appears in the audit."""
    return f"admin:{user.username}"


@dataclass(frozen=True)
class IssuedToken:
    """A token just created. ``raw`` is the only copy of the secret: show it once."""

    token: ApiToken
    raw: str


def _clean_permissions(permissions: list[str] | None) -> list[str]:
    if permissions is None:
        return list(DEFAULT_TOKEN_PERMISSIONS)
    cleaned = sorted({p.strip() for p in permissions if p.strip()})
    unknown = [p for p in cleaned if p not in _VALID_PERMISSIONS]
    if unknown or not cleaned:
        raise ValidationError(
            f"Permissions must be chosen from: {', '.join(Permission.values)}.",
            fields={"permissions": ["Unknown or empty permission list."]},
        )
    return cleaned


def tenant_create(*, slug: str, name: str = "") -> Tenant:
    """Create an active tenant. Raises ConflictError when the slug is taken.

    Runs with the new tenant set for RLS, so the application's role can create it.
    """
    tenant = Tenant(id=uuid.uuid4(), slug=slug, name=name or slug)
    try:
        # Uniqueness is left to the database: under RLS the check could not see other tenants.
        tenant.full_clean(validate_unique=False, validate_constraints=False)
    except DjangoValidationError as exc:
        raise ValidationError("The tenant is invalid.", fields=exc.message_dict) from exc
    try:
        with tenant_context(tenant.id):
            tenant.save(force_insert=True)
    except IntegrityError as exc:
        raise ConflictError("A tenant with this slug already exists.", fields={"slug": ["Taken."]}) from exc
    return tenant


def tenant_deactivate(*, tenant: Tenant) -> Tenant:
    """Deactivate a tenant: its tokens stop working; its data and audit are kept."""
    with tenant_context(tenant.id):
        Tenant.objects.filter(id=tenant.id).update(is_active=False)
    tenant.is_active = False
    return tenant


def token_create(
    *,
    tenant: Tenant,
    actor: str,
    name: str,
    permissions: list[str] | None = None,
    user: str = "",
    repositories: list[str] | None = None,
    expires_at: datetime | None = None,
    issuer: Principal | None = None,
) -> IssuedToken:
    """Issue a token for one client of ``tenant``.

    Without ``permissions`` the token may read and write memories only. ``user`` binds the token
    to one user id, ``repositories`` to a list of repositories. ``issuer``, the principal of a
    token minting another through the API, bounds it: the new token never exceeds its issuer
    (``tenants.access.check_token_within``); operators' commands pass none. The raw token is
    returned once and never stored: only its hash and lookup prefix are.
    """
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > 50:
        raise ValidationError("Token name must be 1-50 characters.", fields={"name": ["1-50 characters."]})
    # The name is shown in every audit actor, activity row and request log line: masked like any
    # free text, and refused if its mask no longer fits.
    name = mask_fields(tenant=tenant, fields={"name": name}).values["name"]
    if len(name) > 50:
        raise ValidationError("Token name must be 1-50 characters once masked.", fields={"name": ["Too long."]})
    if user:
        validate_identifier(user, field="user")
    for repository in repositories or []:
        validate_identifier(repository, field="repositories")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError("Expiry must be in the future.", fields={"expires_at": ["In the past."]})
    permissions = _clean_permissions(permissions)
    repositories = sorted(set(repositories or []))
    if issuer is not None:
        require_permission(issuer, Permission.ADMIN)
        check_token_within(issuer, permissions=permissions, user=user, repositories=repositories)
    with tenant_context(tenant.id):
        token, raw = ApiToken.objects.create_key(
            tenant=tenant,
            name=name,
            permissions=permissions,
            user=user,
            repositories=repositories,
            expiry_date=expires_at,
        )
        audit_event_record(
            tenant=tenant,
            actor=actor,
            action=Action.TOKEN_CREATED,
            resource_type="api_token",
            resource_ids=[token.prefix],
            details={"name": token.name, "permissions": token.permissions, "bound_user": user_pseudonym(user)},
        )
    return IssuedToken(token=token, raw=raw)


def token_revoke(*, tenant: Tenant, actor: str, token: ApiToken) -> ApiToken:
    """Revoke a token of ``tenant``. Idempotent: revoking twice keeps (and audits) the first time."""
    with tenant_context(tenant.id):
        now = timezone.now()
        tokens = ApiToken.objects.for_tenant(tenant).filter(pk=token.pk, revoked=False)
        if tokens.update(revoked=True, revoked_at=now):
            audit_event_record(
                tenant=tenant,
                actor=actor,
                action=Action.TOKEN_REVOKED,
                resource_type="api_token",
                resource_ids=[token.prefix],
            )
        token.refresh_from_db()
    return token


def token_touch(*, token: ApiToken) -> None:
    """Record that a token was just used, at most once per resolution interval.

    Must run in the token's tenant context (the authentication class calls it there).
    """
    now = timezone.now()
    resolution = timedelta(seconds=settings.TOKEN_LAST_USED_RESOLUTION_SECONDS)
    if token.last_used_at is None or now - token.last_used_at >= resolution:
        with transaction.atomic():
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


def tenant_admin_create(*, tenant: Tenant, username: str, password: str) -> User:
    """A staff user bound to ``tenant``: every admin page they open shows only that tenant."""
    try:
        validate_password(password)
    except DjangoValidationError as exc:
        raise ValidationError(" ".join(exc.messages), fields={"password": exc.messages}) from exc
    if User.objects.filter(username=username).exists():
        raise ConflictError("A user with this username already exists.", fields={"username": ["Taken."]})
    return User.objects.create_user(username=username, password=password, is_staff=True, tenant=tenant)
