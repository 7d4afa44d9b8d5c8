"""The admin login's failure throttle (django-axes) keys attempts by a keyed hash of the username
typed, never the username itself: a failed login with someone's email address as the username
leaves no personal data in ``axes_accessattempt`` or in a log line."""

import hashlib
import hmac

from django.conf import settings


def hashed_username(request, credentials: dict | None = None) -> str | None:
    """``AXES_USERNAME_CALLABLE``: the username of a login attempt as ``h:`` and 32 hex digits of
    HMAC-SHA256(SECRET_KEY, username); the same username always gives the same key, so lockouts
    per username keep working."""
    field = settings.AXES_USERNAME_FORM_FIELD
    username = (credentials or {}).get(field)
    if username is None:
        username = getattr(request, "POST", {}).get(field)
    if not username:
        return None
    digest = hmac.new(settings.SECRET_KEY.encode(), f"admin-login|{username}".encode(), hashlib.sha256)
    return f"h:{digest.hexdigest()[:32]}"
