"""The HMAC chain over each tenant's audit events.

link(n) = HMAC-SHA256(key, canonical(event n) || link(n-1)); the first event links to
``GENESIS``. The key is a secret setting, never stored in the database, so rewriting a row —
even as a database superuser — breaks every later link detectably.
"""

import hashlib
import hmac
import json

from django.conf import settings

GENESIS = "0" * 64


def canonical(*, tenant_id, seq, at, actor, action, resource_type, resource_ids, details) -> bytes:
    """The bytes an event's link covers; stable across Python and PostgreSQL round trips."""
    return json.dumps(
        {
            "tenant": str(tenant_id),
            "seq": seq,
            "at": at.isoformat(timespec="microseconds"),
            "actor": actor,
            "action": action,
            "resource_type": resource_type,
            "resource_ids": list(resource_ids),
            "details": details,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def link(*, payload: bytes, prev_hash: str) -> str:
    key = settings.AUDIT_HMAC_KEY.encode()
    return hmac.new(key, payload + prev_hash.encode(), hashlib.sha256).hexdigest()


def purpose_key(purpose: str) -> bytes:
    """A key for one purpose only, derived from ``AUDIT_HMAC_KEY``: what is signed for one purpose
    (a checkpoint) never verifies as another (a link of the chain)."""
    return hmac.new(settings.AUDIT_HMAC_KEY.encode(), f"memory-service:{purpose}".encode(), hashlib.sha256).digest()
