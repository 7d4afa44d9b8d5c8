"""The one rule for a memory's status, shared by search results, listings and the decision index.

Superseded states are derived from supersession links; proposed, rejected and deprecated are set
explicitly on decisions. A full supersession outranks a partial one, which outranks the explicit
lifecycle.

This module holds the status as data; the text agents read for it (the annotation, with the
replacements' titles escaped into one line) is rendered by ``memory_service.retrieval.render``.
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
    title: str | None  # as stored, unescaped; None when the caller may not read the replacement
    partial: bool


@dataclass(frozen=True)
class DerivedStatus:
    """A memory's status and, when superseded, what replaces it (oldest link first)."""

    status: str
    replacements: list[Replacement] = field(default_factory=list)

    @property
    def superseded_by(self) -> list[str]:
        return [r.id for r in self.replacements]


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
