"""Masking of the free-text fields of a request under its tenant's policy: every interface that stores,
queues or logs client text (memories, proposals, search queries) masks it here first."""

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings

from memory_service.exceptions import ApplicationError, ValidationError
from memory_service.inputs import check_storable
from memory_service.pii import MaskingPolicy, MaskResult, PiiTierUnavailable, get_masker
from memory_service.pii.helper import part_ranges
from tenants.context import tenant_context
from tenants.models import PiiMode, Tenant


class PiiTierMissingError(ApplicationError):
    """The tenant's policy needs a detection tier this process lacks: refuse, never ignore."""

    code = "pii_tier_unavailable"
    http_status = 503
    default_message = "The tenant's PII policy needs a detection tier that is not installed; nothing was stored."


def _current_pseudonym_key() -> tuple[str, bytes]:
    """(version, key) of the first entry of PII_PSEUDONYM_KEYS ("2:new,1:old")."""
    first = settings.PII_PSEUDONYM_KEYS.split(",")[0].strip()
    version, _, key = first.partition(":")
    if not key:
        raise ApplicationError("PII_PSEUDONYM_KEYS is not configured; pseudonym masking is unavailable.")
    return version, key.encode()


def tenant_masking_policy(tenant: Tenant) -> MaskingPolicy:
    """The tenant's masking policy, with the current pseudonym key when it uses pseudonyms."""
    version, key = ("1", b"")
    if tenant.pii_mode == PiiMode.PSEUDONYM:
        version, key = _current_pseudonym_key()
    return MaskingPolicy(
        tenant_id=str(tenant.id),
        mode=tenant.pii_mode,
        entities=frozenset(tenant.pii_entities) if tenant.pii_entities else None,
        require_ner=tenant.pii_require_ner,
        pseudonym_key=key,
        pseudonym_key_version=version,
    )


@dataclass
class Masked:
    """Masked values of the free-text fields given, and replacement counts per entity type."""

    values: dict
    counts: dict[str, int]


def _add_counts(total: dict[str, int], more: dict[str, int]) -> None:
    for entity, count in more.items():
        total[entity] = total.get(entity, 0) + count


#: Texts masked ahead for a part of a bulk write (``masking_parts``): (tenant id, policy, results by text).
_batch: ContextVar[tuple[object, MaskingPolicy, dict[str, MaskResult]] | None] = ContextVar(
    "masking_parts", default=None
)


def _strings(value) -> list[str]:
    """Every non-empty string in ``value``: itself, the items of a list, the values of a JSON object
    at any depth (keys are identifiers and are never masked)."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [string for item in value for string in _strings(item)]
    if isinstance(value, dict):
        return [string for item in value.values() for string in _strings(item)]
    return []


def masking_parts(*, tenant: Tenant, values: list) -> Iterator[tuple[range, AbstractContextManager]]:
    """Mask every string in ``values`` (the items of a bulk write) part by part, each part in one
    batch so the name tier reads it together (spaCy's ``nlp.pipe``), so that the caller can store
    one part while the next is masked: yields, in order, the indexes of each part's values and a
    context in which ``mask_fields`` calls for the same tenant take their masked strings instead of
    masking again. Nothing changes in what is masked: same masker, same policy. A large batch has
    several parts (``helper.part_ranges``); with ``PII_HELPER_PROCESS`` on, the helper process
    masks the parts after the first meanwhile. A part that cannot be masked (a character that
    cannot be stored), and every part once a tier is found missing, is skipped: each
    ``mask_fields`` call then raises its own error, or masks its value alone. Read it to the end,
    or close it, to free the helper.
    """
    policy = tenant_masking_policy(tenant)
    ranges = part_ranges([sum(map(len, _strings(value))) for value in values])
    parts = [_storable_strings([values[index] for index in indexes]) for indexes in ranges]
    masked = get_masker().mask_parts(parts, policy, parallel=settings.PII_HELPER_PROCESS)
    missing_tier = False
    try:
        for indexes, part in zip(ranges, parts, strict=True):
            prepared = {}
            if not missing_tier:
                try:
                    prepared = dict(zip(part, next(masked), strict=True))
                except PiiTierUnavailable:
                    missing_tier = True  # each value's own mask_fields raises, or masks it alone
            yield indexes, _using(tenant, policy, prepared)
    finally:
        masked.close()


def _storable_strings(values: list) -> list[str]:
    """The distinct strings of ``values``, or none when one of them cannot be stored (each
    ``mask_fields`` call then raises its own error, naming its field)."""
    unique = list(dict.fromkeys(_strings(values)))
    try:
        check_storable({"values": unique})
    except ValidationError:
        return []
    return unique


@contextmanager
def _using(tenant: Tenant, policy: MaskingPolicy, prepared: dict[str, MaskResult]) -> Iterator[None]:
    """A block in which ``mask_fields`` for ``tenant`` takes the results of ``prepared``."""
    token = _batch.set((tenant.id, policy, prepared))
    try:
        yield
    finally:
        _batch.reset(token)


def _prepared(tenant: Tenant, policy: MaskingPolicy) -> dict[str, MaskResult]:
    batch = _batch.get()
    if batch is None or batch[0] != tenant.id or batch[1] != policy:
        return {}
    return batch[2]


def mask_fields(*, tenant: Tenant, fields: dict) -> Masked:
    """Mask every free-text value in ``fields``: strings, lists of strings (tags) and the string
    values of a flat or nested JSON object (metadata; keys are identifiers and stay). Every string
    not masked ahead by ``masking_parts`` is masked in one batch of its own.

    Raises PiiTierMissingError when the tenant's policy needs a tier this process lacks, and
    ValidationError naming the field for a character that cannot be stored (a NUL, a lone surrogate).
    """
    check_storable(fields)
    policy = tenant_masking_policy(tenant)
    results = dict(_prepared(tenant, policy))
    missing = [string for string in dict.fromkeys(_strings(list(fields.values()))) if string not in results]
    try:
        results.update(zip(missing, get_masker().mask_each(missing, policy), strict=True))
    except PiiTierUnavailable as exc:
        raise PiiTierMissingError() from exc
    counts: dict[str, int] = {}

    def mask(value):
        if isinstance(value, str):
            if not value:
                return value
            _add_counts(counts, results[value].counts)
            return results[value].text
        if isinstance(value, list):
            return [mask(item) for item in value]
        if isinstance(value, dict):
            return {key: mask(item) for key, item in value.items()}
        return value

    return Masked(values={name: mask(value) for name, value in fields.items()}, counts=counts)


def masker_version() -> str:
    return get_masker().version


def mask_query(*, tenant: Tenant, query: str) -> str:
    """A search query masked with the tenant's policy (pseudonyms then match stored pseudonyms)."""
    if not query.strip():
        raise ValidationError("'query' must not be empty.", fields={"query": ["Required."]})
    return mask_fields(tenant=tenant, fields={"query": query}).values["query"]


def tenant_pii_policy_set(
    *, tenant: Tenant, mode: str | None = None, entities: list[str] | None = None, require_ner: bool | None = None
) -> Tenant:
    """Change a tenant's PII policy. A policy this process could not apply is refused, never stored:
    an unknown entity type (400), pseudonyms without PII_PSEUDONYM_KEYS, or a tier that is missing (503).

    ``entities=[]`` means every entity type the loaded tiers detect. Secrets are always masked.
    """
    candidate = Tenant(
        id=tenant.id,
        pii_mode=mode if mode is not None else tenant.pii_mode,
        pii_entities=sorted(set(entities)) if entities is not None else tenant.pii_entities,
        pii_require_ner=require_ner if require_ner is not None else tenant.pii_require_ner,
    )
    if candidate.pii_mode not in PiiMode.values:
        raise ValidationError("'mode' must be label or pseudonym.", fields={"mode": ["Not a valid choice."]})
    try:
        get_masker().check_policy(tenant_masking_policy(candidate))
    except PiiTierUnavailable as exc:
        raise PiiTierMissingError("This policy needs a PII detection tier that is not installed.") from exc
    except ValueError as exc:
        raise ValidationError(str(exc), fields={"entities": ["Unknown entity type."]}) from exc
    with tenant_context(tenant.id):
        Tenant.objects.filter(id=tenant.id).update(
            pii_mode=candidate.pii_mode, pii_entities=candidate.pii_entities, pii_require_ner=candidate.pii_require_ner
        )
        tenant.refresh_from_db()
    return tenant
