"""Test data made through the same services as production (RLS applies: no bypassing role)."""

import re
from itertools import count

from tenants.models import Tenant
from tenants.services import IssuedToken, tenant_create, token_create

_seq = count(1)
_PSEUDONYM = re.compile(r"<([A-Z_]+?)_[0-9a-f]{12}>")


def as_labels(text: str) -> str:
    """``text`` with every keyed pseudonym (``<EMAIL_ADDRESS_1a2b3c4d5e6f>``) written as its label
    (``<EMAIL_ADDRESS>``): tenants made here mask with pseudonyms, the default when a key is set."""
    return _PSEUDONYM.sub(r"<\1>", text)


def make_tenant(slug: str | None = None) -> Tenant:
    return tenant_create(slug=slug or f"tenant-{next(_seq)}")


def make_token(tenant: Tenant, *, name: str = "agent", permissions: list[str] | None = None, **kwargs) -> IssuedToken:
    return token_create(tenant=tenant, actor="system:tests", name=name, permissions=permissions, **kwargs)


def make_memories(
    tenant: Tenant, count: int, *, prefix: str = "note", pad: int = 0, batch: int = 2000, **fields
) -> int:
    """Insert ``count`` synthetic memories fast (bulk, masking skipped: the text carries no PII).

    Defaults to repository scope in ``r1``; ``fields`` override any column but the text, which
    ``pad`` lengthens by that many pseudo-random words. Returns ``count``.
    """
    import random
    import uuid

    from memory_service.memories.models import Memory
    from tenants.context import tenant_context

    values = {"scope": "repository", "repository": "r1", "author": "u1", "kind": "note", "masker_version": "test"}
    values |= fields
    words = ["alpha", "bravo", "cache", "deploy", "index", "lesson", "queue", "retry", "schema", "vector"]

    def padding(i: int) -> str:
        rng = random.Random(i)
        return "".join(" " + rng.choice(words) + str(rng.randrange(1000)) for _ in range(pad))

    with tenant_context(tenant.id):
        for start in range(0, count, batch):
            Memory.objects.bulk_create(
                [
                    Memory(
                        tenant=tenant,
                        text=f"{prefix} {i}: synthetic text for the export of a large tenant" + padding(i),
                        dedup_key=uuid.uuid4().hex,
                        request_hash="",
                        **values,
                    )  # fmt: skip
                    for i in range(start, min(start + batch, count))
                ],
                batch_size=batch,
            )
    return count
