"""Erasure of one user's data in a tenant (README, "Exports, erasure and retention").

Removes the memories the user wrote or owns in every scope, with their vectors and supersession
links, the user's activity rows, the stored session-context digests that may quote them, and every
export archive that may hold them. The audit keeps the fact and the counts under the user's
pseudonym — never the id, never text — and its events need no rewrite: they only ever held
pseudonyms.
"""

from dataclasses import asdict, dataclass

from audit.models import Action
from audit.services import audit_event_record, user_pseudonym
from memory_service.exports.services import export_archives_erase
from memory_service.memories.removal import user_activity_erase, user_memories_erase
from memory_service.session_context.services import session_contexts_erase
from tenants.access import Principal, require_permission, require_unbound
from tenants.context import tenant_context
from tenants.identifiers import validate_identifier
from tenants.models import Permission


@dataclass(frozen=True)
class ErasureCounts:
    memories: int
    embeddings: int
    supersessions: int
    activity: int
    session_contexts: int
    archives: int


def user_erase(*, principal: Principal, user: str) -> ErasureCounts:
    """Erase ``user`` from the principal's tenant in one transaction; returns what was removed.

    Needs ``admin`` and an unbound principal: a user's data spans repositories (403 otherwise).

    Archive files are deleted once the transaction commits (a crash in between leaves a file the
    retention sweep deletes: its job is already marked ``erased``).
    """
    require_permission(principal, Permission.ADMIN)
    require_unbound(principal, "Erasure")
    validate_identifier(user, field="user")
    tenant, actor = principal.tenant, principal.actor
    with tenant_context(tenant.id):
        removed = user_memories_erase(tenant=tenant, user=user)
        counts = ErasureCounts(
            **removed.counts(),
            activity=user_activity_erase(tenant=tenant, user=user),
            session_contexts=session_contexts_erase(tenant=tenant, user=user, repositories=removed.repositories),
            archives=export_archives_erase(tenant=tenant, user=user),
        )
        audit_event_record(
            tenant=tenant, actor=actor, action=Action.ERASE, resource_type="user",
            resource_ids=[user_pseudonym(user)], details={"user": user_pseudonym(user), "counts": asdict(counts)},
        )  # fmt: skip
    return counts
