"""The masker: Presidio's analyzer, built explicitly and once, and our own replacement step.

Detection
    Two tiers. The regex tier is Presidio's ``AnalyzerEngine`` over blank spaCy pipelines with a
    whitespace tokenizer (``spacy.blank("en")``, and the multilingual ``spacy.blank("xx")`` for
    Japanese). Its registry holds only the recognizers of ``recognizers.py``, never Presidio's
    default set (it masks ports, UUIDs and versions). Scores come from validation (checksums,
    suffix lists, required context words), not context enhancement, which is off. The name tier
    (``names.py``: an English NER model, Sudachi's dictionary for Japanese) finds people, batched
    over every text of a bulk write. Nothing is ever downloaded.

    Text is normalised first (``normalize.py``) and its language chosen by script. The regex tier
    reads the folded copy (look-alike letters as ASCII), the name tier the unfolded one. A
    detection inside a harmless code string is dropped unless a checksum, a context or its shape
    proves it (``entities.CERTAIN_ENTITIES``); a label already in the input (``<SECRET>``) is
    plain text: a detection inside one is dropped, one that overlaps one takes it whole.

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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

import regex
import spacy
from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerRegistry, RecognizerResult
from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer
from presidio_analyzer.nlp_engine import NlpArtifacts, SpacyNlpEngine
from spacy.language import Language
from spacy.tokenizer import Tokenizer

from memory_service.pii.allowlist import harmless_spans, label_spans
from memory_service.pii.entities import (
    CERTAIN_ENTITIES,
    CREDIT_CARD,
    EMAIL_ADDRESS,
    ENTITY_TYPES,
    IBAN_CODE,
    IP_ADDRESS,
    JP_MY_NUMBER,
    JP_POSTAL_CODE,
    NER_ENTITIES,
    OPT_IN_ENTITIES,
    PERSON,
    PHONE_NUMBER,
    REGEX_ENTITIES,
    SECRET,
    US_SSN,
)
from memory_service.pii.helper import shared_helper
from memory_service.pii.names import EnglishNames, JapaneseNames, NameFinder, english_pipeline, sudachi_available
from memory_service.pii.normalize import NormalizedText, detect_language, normalize
from memory_service.pii.recognizers import our_recognizers, presidio_recognizers

#: Bump when detection changes: every stored row records the version that masked it.
DETECTION_VERSION = "pii-8"

LANGUAGES = ("en", "ja")

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
            ]
        )
        self.nlp = dict(pipelines)

    def load(self) -> None:
        """Nothing to load: the pipelines were given."""


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


def installed_name_finders() -> dict[str, NameFinder]:
    """The name tier per language from installed packages (see ``names.py``); may be empty."""
    finders: dict[str, NameFinder] = {}
    nlp = english_pipeline()
    english = EnglishNames(nlp) if nlp is not None else None
    if english is not None:
        finders["en"] = english
    if sudachi_available():
        finders["ja"] = JapaneseNames()
    return finders


class Masker:
    """Masks PII in text according to a ``MaskingPolicy``.

    Build it once per process (``get_masker``): loading takes a few seconds. ``tiers`` is
    ``{"regex"}``, plus ``"ner"`` when a name finder is loaded for at least one language
    (``ner_languages``). ``version`` names the detection that produced a masked text.

    One masker serves every thread: ``mask`` keeps no state between calls (patterns are compiled
    while the masker is built).
    """

    def __init__(self, *, name_finders: Mapping[str, NameFinder] | None = None) -> None:
        """``name_finders`` maps a language (``"en"``, ``"ja"``) to its name finder (``names.py``)."""
        name_finders = dict(name_finders or {})
        unknown = set(name_finders) - set(LANGUAGES)
        if unknown:
            raise ValueError(f"Unsupported NER languages: {sorted(unknown)}")
        recognizers = []
        for language in LANGUAGES:
            recognizers += presidio_recognizers(language) + our_recognizers(language)
        pipelines = {language: _blank_pipeline(language) for language in LANGUAGES}
        self._analyzer = AnalyzerEngine(
            registry=RecognizerRegistry(recognizers=recognizers, supported_languages=list(LANGUAGES)),
            nlp_engine=_PipelinesNlpEngine(pipelines),
            supported_languages=list(LANGUAGES),
            default_score_threshold=0.3,
            context_aware_enhancer=_NoContextEnhancer(),
        )
        # Every recognizer here reads the text alone (context enhancement is off), so each scan
        # passes these empty artifacts instead of Presidio building tokens, lemmas and keywords
        # per text: a quarter to a third of a scan's time (bench/RESULTS.md, "Masking on two cores").
        self._no_artifacts = {
            language: NlpArtifacts(
                entities=[], tokens=pipelines[language].make_doc(""), tokens_indices=[], lemmas=[],
                nlp_engine=None, language=language,
            )
            for language in LANGUAGES
        }  # fmt: skip
        self._names = name_finders

        self.ner_languages: frozenset[str] = frozenset(name_finders)
        self.tiers: frozenset[str] = frozenset({"regex", "ner"} if name_finders else {"regex"})
        self.version: str = f"{DETECTION_VERSION}/{'regex+ner' if name_finders else 'regex'}"
        self.entity_types: frozenset[str] = frozenset(REGEX_ENTITIES) | (
            frozenset(NER_ENTITIES) if name_finders else frozenset()
        )

        # Compile every lazily compiled pattern and read the suffix list now, not in a request.
        self.detect_many(["Mail a@example.com, call 03-1234-5678, ask Alice.", "連絡先 a@example.jp 田中さん"],
                         MaskingPolicy(tenant_id=""))  # fmt: skip

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
        the text's language has no name finder.
        """
        return self.mask_each([text], policy)[0]

    def mask_each(self, texts: list[str], policy: MaskingPolicy) -> list[MaskResult]:
        """``mask`` of every text, with the name tier batched over all of them."""
        found = self.detect_many(texts, policy)
        return [_masked(text, detections, policy) for text, detections in zip(texts, found, strict=True)]

    def mask_parts(
        self, parts: list[list[str]], policy: MaskingPolicy, *, parallel: bool = False
    ) -> Iterator[list[MaskResult]]:
        """``mask_each`` of each part, in order, one part at a time, so that the caller can store a
        part while the next is masked: with ``parallel``, this process's helper masks the parts
        after the first meanwhile (``helper.MaskingHelper.detect_parts``). Raises as ``mask`` does,
        when the part that needs the missing tier is reached. The helper is free again once the last
        part is handed over, or when the iterator is closed."""
        self.check_policy(policy)
        detect = partial(self._detect_all, policy=policy)
        found = shared_helper().detect_parts(parts, policy, detect, self.version) if parallel else map(detect, parts)
        try:
            for part, detections in zip(parts, found, strict=True):
                yield [_masked(text, each, policy) for text, each in zip(part, detections, strict=True)]
        finally:
            if parallel:
                found.close()  # type: ignore[attr-defined]

    def mask_many(self, texts: list[str], policy: MaskingPolicy) -> tuple[list[str], dict[str, int]]:
        """Each text masked with ``policy``, and the counts summed over all of them."""
        masked: list[str] = []
        total: dict[str, int] = {}
        for result in self.mask_each(texts, policy):
            masked.append(result.text)
            for entity, count in result.counts.items():
                total[entity] = total.get(entity, 0) + count
        return masked, total

    def detect(self, text: str, policy: MaskingPolicy) -> list[Detection]:
        """The spans ``mask`` replaces, left to right and without overlaps, in original offsets."""
        return self.detect_many([text], policy)[0]

    def detect_many(self, texts: list[str], policy: MaskingPolicy) -> list[list[Detection]]:
        """``detect`` of every text; the name tier reads them all in one batch per language.

        A replacement can uncover PII that was glued to it (``〒100-0005DE89…``: the IBAN has no
        boundary until the postal code becomes a label), so the masked text is scanned again, up
        to ``MAX_PASSES`` times, until nothing new is found: masking masked text changes nothing.
        A later scan that finds a value spanning an earlier replacement widens it (a label never
        hides a value). Raises as ``mask`` does.
        """
        self.check_policy(policy)
        return self._detect_all(texts, policy)

    def _detect_all(self, texts: list[str], policy: MaskingPolicy) -> list[list[Detection]]:
        entities = self._policy_entities(policy)
        normalized = [normalize(text) for text in texts]
        languages = [detect_language(item.text) for item in normalized]
        if _needs_ner(policy):
            for language in languages:
                if language not in self.ner_languages:
                    raise PiiTierUnavailable("ner", language)
        names = self._find_names(normalized, languages, entities)
        return [
            self._detect(text, item, language, spans, entities, policy)
            for text, item, language, spans in zip(texts, normalized, languages, names, strict=True)
        ]

    def _find_names(
        self, normalized: list[NormalizedText], languages: list[str], entities: frozenset[str]
    ) -> list[list[_Span]]:
        """The name tier's spans of each text (normalised offsets), for the entity types asked."""
        found: list[list[_Span]] = [[] for _ in normalized]
        if not entities & set(NER_ENTITIES):
            return found
        for language, finder in self._names.items():
            # The English finder reads every text (it skips those without a capital letter itself):
            # "Priya Raman さんが承認" is a Japanese note with an English name.
            indexes = [index for index, text_language in enumerate(languages) if language in ("en", text_language)]
            if not indexes:
                continue
            spans = finder.find([normalized[index].text for index in indexes])
            for index, text_spans in zip(indexes, spans, strict=True):
                found[index] += [_Span(kind, start, end, 0.85) for start, end, kind in text_spans if kind in entities]
        return found

    def _detect(
        self,
        text: str,
        normalized: NormalizedText,
        language: str,
        names: list[_Span],
        entities: frozenset[str],
        policy: MaskingPolicy,
    ) -> list[Detection]:
        found: list[Detection] = []
        view, pieces = text, [_Piece(0, len(text), 0, len(text), replaced=False)]
        for scan in range(MAX_PASSES):
            current = normalized if scan == 0 else normalize(view)
            spans = self._regex_spans(current.folded, language, entities) + (names if scan == 0 else [])
            new = []
            for span in _select_spans(spans, current.folded):
                start, end = _to_original(*current.original_span(span.start, span.end), pieces)
                new.append(Detection(span.entity, start, end, current.text[span.start : span.end]))
            merged = _merge(found, new)
            if merged == found:
                break
            found = merged
            view, pieces = _replace(text, found, policy)
        return found

    def _regex_spans(self, text: str, language: str, entities: frozenset[str]) -> list[_Span]:
        if not text:
            return []
        wanted = sorted(entities & set(REGEX_ENTITIES))
        results = self._analyzer.analyze(
            text, language=language, entities=wanted, nlp_artifacts=self._no_artifacts[language]
        )
        return [_Span(result.entity_type, result.start, result.end, result.score) for result in results]

    def _policy_entities(self, policy: MaskingPolicy) -> frozenset[str]:
        if policy.entities is None:
            chosen = self.entity_types - OPT_IN_ENTITIES
        else:
            chosen = frozenset(policy.entities) & self.entity_types
        return chosen | {SECRET}


def _needs_ner(policy: MaskingPolicy) -> bool:
    """The policy asks for NER: explicitly, or by naming an entity type only NER detects."""
    return policy.require_ner or bool(policy.entities and set(policy.entities) & set(NER_ENTITIES))


def _overlaps(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(start < other_end and other_start < end for other_start, other_end in spans)


def _inside(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(other_start <= start and end <= other_end for other_start, other_end in spans)


def _widen(start: int, end: int, spans: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """``[start, end)`` grown to cover every span it overlaps."""
    for other_start, other_end in spans:
        if start < other_end and other_start < end:
            start, end = min(start, other_start), max(end, other_end)
    return start, end


def _select_spans(spans: list[_Span], text: str) -> list[_Span]:
    """The detections to replace, in normalised offsets.

    A label already in the text (``<SECRET>``) is text like any other: a detection lying inside
    one is the label's own word and is dropped; a detection overlapping one is kept and takes the
    label with it. A detection inside a harmless code string is dropped unless its type is certain
    (``CERTAIN_ENTITIES``). Of overlapping detections, a secret wins, then the longer, then the
    higher score.
    """
    if not spans:
        return []
    labels = label_spans(text)
    harmless = harmless_spans(text) if any(span.entity not in CERTAIN_ENTITIES for span in spans) else []
    candidates = []
    for span in spans:
        if _inside(span.start, span.end, labels):
            continue
        if span.entity not in CERTAIN_ENTITIES and _inside(span.start, span.end, harmless):
            continue
        candidates.append(_Span(span.entity, *_widen(span.start, span.end, labels), span.score))
    candidates.sort(key=lambda span: (span.entity != SECRET, -(span.end - span.start), -span.score, span.start))
    chosen: list[_Span] = []
    for candidate in candidates:
        if not _overlaps(candidate.start, candidate.end, ((span.start, span.end) for span in chosen)):
            chosen.append(candidate)
    return chosen


def _merge(found: list[Detection], new: list[Detection]) -> list[Detection]:
    """``found`` with the ``new`` detections added, ordered by start. A new detection that overlaps
    earlier ones replaces them with their union (a secret among them makes the union a secret);
    one inside an earlier detection adds nothing."""
    merged = list(found)
    for detection in new:
        overlapping = [other for other in merged if other.start < detection.end and detection.start < other.end]
        if any(other.start <= detection.start and detection.end <= other.end for other in overlapping):
            continue
        if overlapping:
            entities = {detection.entity, *(other.entity for other in overlapping)}
            detection = Detection(
                SECRET if SECRET in entities else detection.entity,
                min(detection.start, *(other.start for other in overlapping)),
                max(detection.end, *(other.end for other in overlapping)),
                detection.value,
            )
            merged = [other for other in merged if other not in overlapping]
        merged.append(detection)
    return sorted(merged, key=lambda detection: detection.start)


@dataclass(frozen=True)
class _Piece:
    """A stretch of the masked text: ``original[start:end]`` became ``masked[masked_start:masked_end]``,
    as it was (``replaced`` False) or as a label."""

    start: int
    end: int
    masked_start: int
    masked_end: int
    replaced: bool


def _masked(text: str, detections: list[Detection], policy: MaskingPolicy) -> MaskResult:
    """``text`` with its detections replaced, and their counts per entity type."""
    counts: dict[str, int] = {}
    for detection in detections:
        counts[detection.entity] = counts.get(detection.entity, 0) + 1
    return MaskResult(text=_replace(text, detections, policy)[0], counts=counts)


def _replace(text: str, detections: list[Detection], policy: MaskingPolicy) -> tuple[str, list[_Piece]]:
    """``text`` with the (ordered, non-overlapping) detections replaced, and its pieces."""
    parts: list[str] = []
    pieces: list[_Piece] = []
    position = masked_position = 0
    for detection in [*detections, None]:
        end = len(text) if detection is None else detection.start
        pieces.append(_Piece(position, end, masked_position, masked_position + end - position, replaced=False))
        parts.append(text[position:end])
        masked_position += end - position
        if detection is not None:
            replacement = _replacement(detection, policy)
            pieces.append(_Piece(end, detection.end, masked_position, masked_position + len(replacement), True))
            parts.append(replacement)
            masked_position += len(replacement)
            position = detection.end
    return "".join(parts), pieces


def _to_original(start: int, end: int, pieces: list[_Piece]) -> tuple[int, int]:
    """Original offsets of the span ``[start, end)`` of masked text. An end that falls in a
    replacement takes all of what it replaced; so does a start."""
    return _original_offset(start, pieces, at_start=True), _original_offset(end, pieces, at_start=False)


def _original_offset(offset: int, pieces: list[_Piece], *, at_start: bool) -> int:
    for piece in pieces:
        inside = (
            piece.masked_start <= offset < piece.masked_end
            if at_start
            else piece.masked_start < offset <= piece.masked_end
        )
        if inside:
            if piece.replaced:
                return piece.start if at_start else piece.end
            return piece.start + offset - piece.masked_start
    return pieces[-1].end if pieces else offset


def _replacement(detection: Detection, policy: MaskingPolicy) -> str:
    entity = detection.entity
    if entity == SECRET or policy.mode == "label":
        return f"<{entity}>"
    value = canonical_value(entity, detection.value)
    message = f"{policy.pseudonym_key_version}|{policy.tenant_id}|{entity}|{value}"
    digest = hmac.new(policy.pseudonym_key, message.encode(), hashlib.sha256).hexdigest()
    return f"<{entity}_{digest[:12]}>"


#: A replacement as ``_replacement`` writes it: ``<PERSON>``, ``<PERSON_1a2b3c4d5e6f>``, ``<SECRET>``.
_REPLACEMENT = regex.compile(rf"<({'|'.join(sorted(ENTITY_TYPES, key=len, reverse=True))})(?:_([0-9a-f]{{12}}))?>")


def text_for_embedding(text: str) -> str:
    """Masked ``text`` as an embedding model should read it: a person's label or pseudonym removed,
    any other pseudonym reduced to its label (``<EMAIL_ADDRESS_1a2b…>`` → ``<EMAIL_ADDRESS>``).

    A pseudonym's twelve random hex digits are noise to a model, and a person's label says nothing
    of what a note is about: in a conversation where every turn starts with its speaker, the names
    pulled each query towards one speaker's turns. Removed, the dense stage alone found 0.05–0.07
    more of the evidence in its top 10 (bench/RESULTS.md, "Names out of the vectors"). The
    full-text stage keeps them: there a pseudonym matches the same person exactly."""
    return _REPLACEMENT.sub(lambda match: "" if match[1] == PERSON else f"<{match[1]}>", text)


def pseudonyms_only(text: str) -> str:
    """Masked ``text`` with each replacement reduced to its pseudonym's digits, a label without one
    to nothing (``<PERSON_1a2b3c4d5e6f>`` → ``1a2b3c4d5e6f``; ``<SECRET>`` → ``""``): the words of
    a label say only that something was masked, and would match every note where anything was."""
    return _REPLACEMENT.sub(lambda match: f" {match[2]} " if match[2] else " ", text)


def person_pseudonyms(text: str) -> list[str]:
    """The digits of each person's pseudonym in masked ``text``, once each, in order of appearance
    (``<PERSON_1a2b3c4d5e6f>`` → ``1a2b3c4d5e6f``): the people a search query names, as the
    full-text documents hold them. None where names are masked with labels (``<PERSON>``)."""
    return list(dict.fromkeys(match[2] for match in _REPLACEMENT.finditer(text) if match[1] == PERSON and match[2]))


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
    if entity in (CREDIT_CARD, JP_MY_NUMBER, JP_POSTAL_CODE, US_SSN):
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
                _masker = Masker(name_finders=installed_name_finders())
    return _masker
