"""The one rule for a memory's status, shared by search results, listings and the decision index.

Superseded states are derived from supersession links; proposed, rejected and deprecated are set
explicitly on decisions. A full supersession outranks a partial one, which outranks the explicit
lifecycle.
"""

from dataclasses import dataclass, field

from memory_service.memories.models import Lifecycle


class Status:
    CURRENT = "current"
    SUPERSEDED = "superseded"
    PARTIALLY_SUPERSEDED = "partially_superseded"
    PROPOSED = "proposed"
    REJECTED = "rejected"
    DEPRECATED = "deprecated"


@dataclass(frozen=True)
class Replacement:
    id: str
    title: str | None  # None when the caller may not read the replacement
    partial: bool


@dataclass(frozen=True)
class DerivedStatus:
    status: str
    replacements: list[Replacement] = field(default_factory=list)

    @property
    def superseded_by(self) -> list[str]:
        return [r.id for r in self.replacements]

    @property
    def annotation(self) -> str:
        """The marker shown to agents; empty for a current memory without a lifecycle."""
        targets = ", ".join(f"{r.id} {r.title}".strip() if r.title else r.id for r in self.replacements)
        return {
            Status.SUPERSEDED: f"⚠️ superseded → {targets}",
            Status.PARTIALLY_SUPERSEDED: f"△ partially superseded → {targets}",
            Status.PROPOSED: "△ proposed (not approved)",
            Status.REJECTED: "⚠️ rejected",
            Status.DEPRECATED: "⚠️ deprecated",
        }.get(self.status, "")


def derive_status(*, lifecycle: str, replacements: list[Replacement]) -> DerivedStatus:
    """Status of one memory from its explicit lifecycle and the memories that replace it."""
    full = [r for r in replacements if not r.partial]
    if full:
        return DerivedStatus(Status.SUPERSEDED, full)
    if replacements:
        return DerivedStatus(Status.PARTIALLY_SUPERSEDED, replacements)
    explicit = {
        Lifecycle.PROPOSED: Status.PROPOSED,
        Lifecycle.REJECTED: Status.REJECTED,
        Lifecycle.DEPRECATED: Status.DEPRECATED,
    }
    return DerivedStatus(explicit.get(lifecycle, Status.CURRENT))
