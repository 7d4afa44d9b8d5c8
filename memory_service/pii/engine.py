"""The masker: Presidio's analyzer, built explicitly and once, and our own replacement step.

Detection
    ``AnalyzerEngine`` over a ``SpacyNlpEngine`` whose pipelines we build: blank pipelines with a
    whitespace tokenizer (``spacy.blank("en")``, and the multilingual ``spacy.blank("xx")`` for
    Japanese, so nothing depends on a morphological analyser), or an installed NER model per
    language. Nothing is ever
    downloaded. The registry holds only the recognizers of ``recognizers.py``, never Presidio's
    default set (it masks ports, UUIDs and versions). Scores come from validation (checksums,
    suffix lists), not context words: blank pipelines have no lemmas, so context enhancement is off.

    Text is normalised first (``normalize.py``) and its language chosen by script; detections
    inside harmless code strings or existing labels are dropped (``allowlist.py``).

Replacement
    A plain replacement of non-overlapping spans in the *original* text rather than Presidio's
    ``AnonymizerEngine``: spans are found in normalised text and must be mapped back to original
    offsets first, overlaps are resolved by our own rule (a secret always wins, then the longer
    span, then the higher score), and a pseudonym needs the normalised value. The anonymizer would
    add a second conflict resolution and per-call operator set-up for no gain.

    Secrets always become ``<SECRET>``. Other entities become ``<ENTITY>`` (label mode) or
    ``<ENTITY_xxxxxxxxxxxx>`` (pseudonym mode): the first 12 hex digits (48 bits) of
    HMAC-SHA256(key, "{key version}|{tenant id}|{entity}|{canonical value}"), so a value gets the
    same pseudonym in every note of a tenant, and different tenants get unrelated pseudonyms.

The masker never logs, prints or raises with the text it masks.
"""

import hashlib
import hmac
import ipaddress
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import regex
import spacy
from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerRegistry, RecognizerResult
from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer
from presidio_analyzer.nlp_engine import NerModelConfiguration, NlpArtifacts, SpacyNlpEngine
from presidio_analyzer.predefined_recognizers import SpacyRecognizer
from spacy.language import Language
from spacy.tokenizer import Tokenizer
from spacy.tokens import Span

from memory_service.pii.allowlist import harmless_spans, label_spans
from memory_service.pii.entities import (
    CREDIT_CARD,
    EMAIL_ADDRESS,
    ENTITY_TYPES,
    IBAN_CODE,
    IP_ADDRESS,
    JP_MY_NUMBER,
    JP_POSTAL_CODE,
    LOCATION,
    NER_ENTITIES,
    PERSON,
    PHONE_NUMBER,
    REGEX_ENTITIES,
    SECRET,
)
from memory_service.pii.normalize import detect_language, normalize
from memory_service.pii.recognizers import our_recognizers, presidio_recognizers

#: Bump when detection changes: every stored row records the version that masked it.
DETECTION_VERSION = "pii-1"

LANGUAGES = ("en", "ja")

#: Installed spaCy packages that give the NER tier, best first per language.
NER_MODELS: Mapping[str, tuple[str, ...]] = {"en": ("en_core_web_md", "en_core_web_sm"), "ja": ("ja_ginza",)}

#: NER labels kept, as our entity types: OntoNotes (English models) and GiNZA's extended labels.
NER_LABELS: Mapping[str, str] = {
    "PERSON": PERSON,
    "PER": PERSON,
    "Person": PERSON,
    "GPE": LOCATION,
    "LOC": LOCATION,
    "Country": LOCATION,
    "Province": LOCATION,
    "City": LOCATION,
    "GPE_Other": LOCATION,
    "Location": LOCATION,
    "Location_Other": LOCATION,
}

MODES = ("label", "pseudonym")

#: Scans of one text at most (see ``Masker.detect``); a second scan finds something only when
#: PII was glued to other PII.
MAX_PASSES = 3


class PiiTierUnavailable(Exception):
    """A policy needs a detection tier (``.tier``, e.g. ``"ner"``) this process has not loaded."""

    def __init__(self, tier: str, language: str | None = None) -> None:
        self.tier = tier
        self.language = language
        where = f" for language {language!r}" if language else ""
        super().__init__(f"The PII detection tier {tier!r} is not loaded{where}.")


@dataclass(frozen=True)
class MaskingPolicy:
    """What to mask for a tenant, and how.

    ``entities`` is None for every type the loaded tiers detect; SECRET is masked in any case.
    ``require_ner`` refuses to mask without the NER tier. Pseudonym mode needs ``pseudonym_key``.
    """

    tenant_id: str
    mode: str = "label"
    entities: frozenset[str] | None = None
    require_ner: bool = False
    pseudonym_key: bytes = b""
    pseudonym_key_version: str = "1"


@dataclass(frozen=True)
class MaskResult:
    """The original text with each detected span replaced, and the replacements per entity type."""

    text: str
    counts: dict[str, int]


@dataclass(frozen=True)
class Detection:
    """``entity`` found at ``text[start:end]`` (original offsets); ``value`` is its normalised form."""

    entity: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class _Span:
    entity: str
    start: int
    end: int
    score: float


class _PipelinesNlpEngine(SpacyNlpEngine):
    """Presidio's spaCy engine over pipelines given ready-made: never loads or downloads a model."""

    def __init__(self, pipelines: Mapping[str, Language]) -> None:
        super().__init__(
            models=[
                {"lang_code": language, "model_name": pipeline.meta["name"]} for language, pipeline in pipelines.items()
            ],
            ner_model_configuration=NerModelConfiguration(model_to_presidio_entity_mapping=dict(NER_LABELS)),
        )
        self.nlp = dict(pipelines)

    def load(self) -> None:
        """Nothing to load: the pipelines were given."""

    def _get_updated_entities(self, entities: list[Span], scores: list[float]) -> tuple[list[Span], list[float]]:
        """Keep the entities whose label we map (silently: other labels are expected)."""
        kept = [(entity, score) for entity, score in zip(entities, scores, strict=True) if entity.label_ in NER_LABELS]
        for entity, _ in kept:
            entity.label_ = NER_LABELS[entity.label_]
        return [entity for entity, _ in kept], [score for _, score in kept]


class _NoContextEnhancer(ContextAwareEnhancer):
    """Leaves scores as the recognizers set them (blank pipelines have no lemmas to match)."""

    def __init__(self) -> None:
        super().__init__(
            context_similarity_factor=0,
            min_score_with_context_similarity=0,
            context_prefix_count=0,
            context_suffix_count=0,
        )

    def enhance_using_context(
        self,
        text: str,
        raw_results: list[RecognizerResult],
        nlp_artifacts: NlpArtifacts,
        recognizers: list[EntityRecognizer],
        context: list[str] | None = None,
    ) -> list[RecognizerResult]:
        """The results unchanged."""
        return raw_results


def _blank_pipeline(language: str) -> Language:
    """A blank pipeline that splits on whitespace only.

    The regex tier needs no tokens (context enhancement is off), and spaCy's rule-based tokenizer
    takes seconds on a long run without spaces (``a:a:a:…``); a whitespace split is linear.
    Japanese uses the multilingual ``xx`` language: ``spacy.blank("ja")`` needs SudachiPy.
    """
    nlp = spacy.blank("xx" if language == "ja" else language)
    nlp.tokenizer = Tokenizer(nlp.vocab)
    return nlp


def installed_ner_pipelines() -> dict[str, Language]:
    """The NER pipeline per language from installed spaCy packages (``NER_MODELS``); may be empty."""
    pipelines = {}
    for language, names in NER_MODELS.items():
        for name in names:
            if spacy.util.is_package(name):
                pipelines[language] = spacy.load(name)
                break
    return pipelines


class Masker:
    """Masks PII in text according to a ``MaskingPolicy``.

    Build it once per process (``get_masker``): loading takes about a second. ``tiers`` is
    ``{"regex"}``, plus ``"ner"`` when a NER pipeline is loaded for at least one language
    (``ner_languages``). ``version`` names the detection that produced a masked text.

    One masker serves every thread: ``mask`` keeps no state between calls (patterns are compiled
    while the masker is built).
    """

    def __init__(self, *, ner_pipelines: Mapping[str, Language] | None = None) -> None:
        """``ner_pipelines`` maps a language (``"en"``, ``"ja"``) to a spaCy pipeline with an NER
        component; other languages get a blank tokenizer.
        """
        ner_pipelines = dict(ner_pipelines or {})
        unknown = set(ner_pipelines) - set(LANGUAGES)
        if unknown:
            raise ValueError(f"Unsupported NER languages: {sorted(unknown)}")
        pipelines = {language: _blank_pipeline(language) for language in LANGUAGES} | ner_pipelines

        recognizers = []
        for language in LANGUAGES:
            recognizers += presidio_recognizers(language) + our_recognizers(language)
            if language in ner_pipelines:
                recognizers.append(SpacyRecognizer(supported_language=language, supported_entities=list(NER_ENTITIES)))
        self._analyzer = AnalyzerEngine(
            registry=RecognizerRegistry(recognizers=recognizers, supported_languages=list(LANGUAGES)),
            nlp_engine=_PipelinesNlpEngine(pipelines),
            supported_languages=list(LANGUAGES),
            default_score_threshold=0.3,
            context_aware_enhancer=_NoContextEnhancer(),
        )
        self._supported = {
            language: frozenset(self._analyzer.get_supported_entities(language)) for language in LANGUAGES
        }

        self.ner_languages: frozenset[str] = frozenset(ner_pipelines)
        self.tiers: frozenset[str] = frozenset({"regex", "ner"} if ner_pipelines else {"regex"})
        self.version: str = f"{DETECTION_VERSION}/{'regex+ner' if ner_pipelines else 'regex'}"
        self.entity_types: frozenset[str] = frozenset(REGEX_ENTITIES) | (
            frozenset(NER_ENTITIES) if ner_pipelines else frozenset()
        )

        # Compile every lazily compiled pattern and read the suffix list now, not in a request.
        for language, sample in (("en", "Mail a@example.com, call 03-1234-5678."), ("ja", "連絡先 a@example.jp")):
            self._analyzer.analyze(sample, language=language, entities=sorted(self._supported[language]))

    def check_policy(self, policy: MaskingPolicy) -> None:
        """Raise ValueError for a malformed policy or unknown entity type, and PiiTierUnavailable
        when the policy needs the NER tier (``require_ner``, or PERSON / LOCATION named) and it is
        not loaded.
        """
        if policy.mode not in MODES:
            raise ValueError(f"Unknown masking mode {policy.mode!r}; expected one of {MODES}.")
        if policy.mode == "pseudonym" and not policy.pseudonym_key:
            raise ValueError("Pseudonym mode needs a pseudonym_key.")
        if policy.entities is not None:
            unknown = set(policy.entities) - set(ENTITY_TYPES)
            if unknown:
                raise ValueError(f"Unknown entity types: {sorted(unknown)}")
        if _needs_ner(policy) and "ner" not in self.tiers:
            raise PiiTierUnavailable("ner")

    def mask(self, text: str, policy: MaskingPolicy) -> MaskResult:
        """``text`` with every PII span the policy asks for replaced, and the counts per type.

        Raises what ``check_policy`` raises, and PiiTierUnavailable when the policy needs NER and
        the text's language has no NER pipeline.
        """
        detections = self.detect(text, policy)
        counts: dict[str, int] = {}
        for detection in detections:
            counts[detection.entity] = counts.get(detection.entity, 0) + 1
        return MaskResult(text=_replace(text, detections, policy)[0], counts=counts)

    def detect(self, text: str, policy: MaskingPolicy) -> list[Detection]:
        """The spans ``mask`` replaces, left to right and without overlaps, in original offsets.

        A replacement can uncover PII that was glued to it (``〒100-0005DE89…``: the IBAN has no
        boundary until the postal code becomes a label), so the masked text is scanned again, up
        to ``MAX_PASSES`` times, until nothing new is found: masking masked text changes nothing.
        Raises as ``mask`` does.
        """
        self.check_policy(policy)
        found: list[Detection] = []
        view, segments = text, [(0, len(text), 0)]
        for _ in range(MAX_PASSES):
            new = []
            for detection in self._detect_once(view, policy):
                original = _to_original(detection.start, detection.end, segments)
                if original is not None:
                    new.append(Detection(detection.entity, *original, detection.value))
            if not new:
                break
            found = sorted(found + new, key=lambda detection: detection.start)
            view, segments = _replace(text, found, policy)
        return found

    def _detect_once(self, text: str, policy: MaskingPolicy) -> list[Detection]:
        """One scan of ``text``: its detections in its own offsets."""
        if not text:
            return []
        normalized = normalize(text)
        language = detect_language(normalized.text)
        if _needs_ner(policy) and language not in self.ner_languages:
            raise PiiTierUnavailable("ner", language)
        entities = self._policy_entities(policy) & self._supported[language]
        results = self._analyzer.analyze(normalized.text, language=language, entities=sorted(entities))

        detections: list[Detection] = []
        for span in sorted(_select_spans(results, normalized.text), key=lambda span: span.start):
            start, end = normalized.original_span(span.start, span.end)
            if detections and start < detections[-1].end:  # both inside one original grapheme cluster
                continue
            detections.append(Detection(span.entity, start, end, normalized.text[span.start : span.end]))
        return detections

    def mask_many(self, texts: list[str], policy: MaskingPolicy) -> tuple[list[str], dict[str, int]]:
        """Each text masked with ``policy``, and the counts summed over all of them."""
        masked: list[str] = []
        total: dict[str, int] = {}
        for text in texts:
            result = self.mask(text, policy)
            masked.append(result.text)
            for entity, count in result.counts.items():
                total[entity] = total.get(entity, 0) + count
        return masked, total

    def _policy_entities(self, policy: MaskingPolicy) -> frozenset[str]:
        chosen = self.entity_types if policy.entities is None else frozenset(policy.entities)
        return chosen | {SECRET}


def _needs_ner(policy: MaskingPolicy) -> bool:
    """The policy asks for NER: explicitly, or by naming an entity type only NER detects."""
    return policy.require_ner or bool(policy.entities and set(policy.entities) & set(NER_ENTITIES))


def _overlaps(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(start < other_end and other_start < end for other_start, other_end in spans)


def _inside(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(other_start <= start and end <= other_end for other_start, other_end in spans)


def _select_spans(results: list[RecognizerResult], text: str) -> list[_Span]:
    """The detections to replace: none touching an existing label, no non-secret inside a harmless
    code string, and no two overlapping (a secret wins, then the longer, then the higher score).
    """
    if not results:
        return []
    labels = label_spans(text)
    harmless = harmless_spans(text) if any(result.entity_type != SECRET for result in results) else []
    candidates = [
        _Span(result.entity_type, result.start, result.end, result.score)
        for result in results
        if not _overlaps(result.start, result.end, labels)
        and (result.entity_type == SECRET or not _inside(result.start, result.end, harmless))
    ]
    candidates.sort(key=lambda span: (span.entity != SECRET, -(span.end - span.start), -span.score, span.start))
    chosen: list[_Span] = []
    for candidate in candidates:
        if not _overlaps(candidate.start, candidate.end, ((span.start, span.end) for span in chosen)):
            chosen.append(candidate)
    return chosen


#: (original start, original end, masked start) of each stretch of text a replacement left as is.
_Segments = list[tuple[int, int, int]]


def _replace(text: str, detections: list[Detection], policy: MaskingPolicy) -> tuple[str, _Segments]:
    """``text`` with the (ordered, non-overlapping) detections replaced, and its unmasked segments."""
    pieces: list[str] = []
    segments: _Segments = []
    position = masked_position = 0
    for detection in [*detections, None]:
        end = len(text) if detection is None else detection.start
        segments.append((position, end, masked_position))
        pieces.append(text[position:end])
        masked_position += end - position
        if detection is not None:
            replacement = _replacement(detection, policy)
            pieces.append(replacement)
            masked_position += len(replacement)
            position = detection.end
    return "".join(pieces), segments


def _to_original(start: int, end: int, segments: _Segments) -> tuple[int, int] | None:
    """Original offsets of a span of masked text; None unless it lies in one unmasked segment
    (spans touching a label are dropped before this, so that does not happen).
    """
    for original_start, original_end, masked_start in segments:
        if masked_start <= start and end <= masked_start + original_end - original_start:
            return original_start + start - masked_start, original_start + end - masked_start
    return None


def _replacement(detection: Detection, policy: MaskingPolicy) -> str:
    entity = detection.entity
    if entity == SECRET or policy.mode == "label":
        return f"<{entity}>"
    value = canonical_value(entity, detection.value)
    message = f"{policy.pseudonym_key_version}|{policy.tenant_id}|{entity}|{value}"
    digest = hmac.new(policy.pseudonym_key, message.encode(), hashlib.sha256).hexdigest()
    return f"<{entity}_{digest[:12]}>"


_NON_DIGITS = regex.compile(r"[^0-9]")
_SPACES_AND_DASHES = regex.compile(r"[\s\-\u2010-\u2015\u2212\u30fc]+")


def canonical_value(entity: str, value: str) -> str:
    """The form of a normalised value that pseudonyms are computed from, so that spellings of the
    same value (``090-1234-5678`` and ``+81 90 1234 5678``, ``Bob@Example.com`` and
    ``bob@example.com``) get the same pseudonym.
    """
    if entity == PHONE_NUMBER:
        digits = _NON_DIGITS.sub("", value)
        if value.lstrip().startswith("+81"):
            return "0" + digits[2:].removeprefix("0")
        return ("+" if value.lstrip().startswith("+") else "") + digits
    if entity in (CREDIT_CARD, JP_MY_NUMBER, JP_POSTAL_CODE):
        return _NON_DIGITS.sub("", value)
    if entity == IBAN_CODE:
        return _SPACES_AND_DASHES.sub("", value).upper()
    if entity == IP_ADDRESS:
        try:
            return str(ipaddress.ip_interface(value))
        except ValueError:
            return value.lower()
    if entity == EMAIL_ADDRESS:
        return value.lower()
    return " ".join(value.casefold().split())


_masker: Masker | None = None
_masker_lock = threading.Lock()


def get_masker() -> Masker:
    """The process-wide masker, built on first use (thread-safe) with the installed NER models."""
    global _masker
    if _masker is None:
        with _masker_lock:
            if _masker is None:
                _masker = Masker(ner_pipelines=installed_ner_pipelines())
    return _masker
