"""PII masking: detect personal data and secrets in free text and replace them, per tenant policy.

Independent of Django (Django code imports it). Usage::

    result = get_masker().mask(text, MaskingPolicy(tenant_id=str(tenant.id)))
    result.text, result.counts   # masked text; replacements per entity type, never values
"""

from memory_service.pii.engine import (
    Masker,
    MaskingPolicy,
    MaskResult,
    PiiTierUnavailable,
    get_masker,
    person_pseudonyms,
    pseudonyms_only,
    text_for_embedding,
)
from memory_service.pii.entities import ENTITY_TYPES, REGEX_ENTITIES, SECRET

__all__ = [
    "ENTITY_TYPES",
    "REGEX_ENTITIES",
    "SECRET",
    "MaskResult",
    "Masker",
    "MaskingPolicy",
    "PiiTierUnavailable",
    "get_masker",
    "person_pseudonyms",
    "pseudonyms_only",
    "text_for_embedding",
]
