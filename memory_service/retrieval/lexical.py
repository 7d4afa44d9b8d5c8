"""Full-text documents and queries that match Japanese without a morphological analyser.

Runs of CJK characters (kanji, kana, CJK punctuation excluded) are indexed as overlapping
character bigrams — "接続エラー" → "接続 続エ エラ ラー" — so any two-character fragment of a
query finds them. Other text is lower-cased words reduced to their English stems
(Snowball: "classes", "class" → "class"; "driving" → "drive"), indexed with PostgreSQL's
``simple`` configuration, which keeps each term as given. The memory's date is part of the
document, so "March 2024" or "2024-03" can find it. Stems gained 0.05 of recall@10 for BM25 alone
on the long-conversation set (bench/RESULTS.md, "Retrieval quality").

Changing what ``lexical_document`` produces changes every stored document: a migration must
rebuild them (``memories.migrations.0011_stemmed_documents``).
"""

import functools
import re
import threading
import unicodedata
from collections.abc import Iterable
from datetime import datetime

import snowballstemmer

from memory_service.pii import pseudonyms_only, text_for_embedding

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\u30fc]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Characters that make a text "cjk" rather than "latin" for the lexical gate (kana, CJK ideographs,
# compatibility ideographs, half-width katakana). The same class is used in Python and in SQL.
CJK_SCRIPT_CLASS = "[\u3040-\u9fff\uf900-\ufaff\uff66-\uff9f]"
_CJK_SCRIPT = re.compile(CJK_SCRIPT_CLASS)


def script_of(text: str) -> str:
    """'cjk' if the text has CJK characters, else 'latin' — language by script."""
    return "cjk" if _CJK_SCRIPT.search(text) else "latin"


# An identifier, written alike in notes of any language: letters and digits joined by "_" or "."
# ("pool_size", "max.poll.records", "Node.js"), a word with a digit ("E2E", "v1", "threeds_v2"),
# a capital inside a word ("reducedMotion", "ImagePullBackOff", "iOS"), or words joined by hyphens
# with a capital or a digit after one ("X-Debug-Token"). Plain hyphenated words ("end-to-end",
# "third-party") are English, not identifiers. ASCII only, bounded by anything but ASCII or
# accented Latin letters, digits, "_", "." and a hyphen inside a word: a Japanese sentence writes
# an identifier against its kana ("kuromoji_stemmerを入れた"), a command line after its dashes
# ("--pool_size", "-Xmx512m"), while "naïveBayes" is one word, not "veBayes".
_BEFORE = r"(?<![A-Za-z0-9_.\u00c0-\u024f])(?<![A-Za-z0-9_]-)"
_IDENTIFIER = re.compile(
    _BEFORE + r"(?:[A-Za-z0-9]+(?:[_.][A-Za-z0-9]+)+|_\w+|\w+_|[A-Za-z]+\d\w*|\d+[A-Za-z]\w*|[a-z]+[A-Z]\w*"
    r"|[A-Z][a-z]+[A-Z]\w*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*-[A-Z0-9]\w*)"
    r"(?![A-Za-z0-9_\-\u00c0-\u024f])",
    re.ASCII,
)
# What the pattern takes that names nothing: abbreviations of single letters ("e.g", "i.e", "a.m")
# and a number with an ordinal's or a unit's letters ("2nd", "60th", "10ms", "503s", "5k", "2x").
_NOT_AN_IDENTIFIER = re.compile(r"[a-z](?:\.[a-z])+|\d+(?:st|nd|rd|th|s|ms|m|h|d|k|x)", re.IGNORECASE)
_LABEL = re.compile(r"<[A-Z_]+>")
# A query names at most this many: each is matched in the text of every candidate within reach.
MAX_QUERY_IDENTIFIERS = 8


def query_identifiers(query: str, *, besides: Iterable[str] = ()) -> list[str]:
    """The identifiers (``_IDENTIFIER``) the masked ``query`` holds of its own, lower-cased, each
    once, in order, at most ``MAX_QUERY_IDENTIFIERS``: a masked value's label or pseudonym is none,
    nor an abbreviation ("e.g") or a number with a unit ("10ms", "2nd"), nor the name of a scope
    searched, whole or a part of it between "/" (``besides``: searching the repository
    ``billing_core``, any of its notes may name ``billing_core``, and naming it picks none of them);
    full-width letters count as letters (NFKC). "kuromoji_stemmer を入れた理由" → ["kuromoji_stemmer"]."""
    text = unicodedata.normalize("NFKC", _LABEL.sub(" ", text_for_embedding(query)))
    scopes = {part for name in besides for part in (name, *name.split("/"))}
    scopes = {unicodedata.normalize("NFKC", part).lower() for part in scopes if part}
    found = (match.group() for match in _IDENTIFIER.finditer(text))
    named = dict.fromkeys(token.lower() for token in found if not _NOT_AN_IDENTIFIER.fullmatch(token))
    return [identifier for identifier in named if identifier not in scopes][:MAX_QUERY_IDENTIFIERS]


def holds_identifier(query: str, *, besides: Iterable[str] = ()) -> bool:
    """Whether the masked ``query`` holds an identifier of its own, other than the names of the
    scopes searched (``query_identifiers``). A full-text match on an identifier is no vote for the
    query's language: a Japanese note that names ``SCHEDULE_EXACT_ALARM`` matches an English
    question about it as well as an English note would."""
    return bool(query_identifiers(query, besides=besides))


# An identifier named in a text stands alone: no letter, digit, "_" or hyphenated word part
# against it, and no "." joining it to more of a dotted name ("payments.charge.captured.v1.dlq"
# does not name "payments.charge.captured.v1", nor "captured.v1" "v1"; "pool_size." does).
_NAMED_BEFORE = r"(?<![a-z0-9_\u00c0-\u024f])(?<![a-z0-9_]-)(?<![a-z0-9_]\.)"
_NAMED_AFTER = r"(?![a-z0-9_\u00c0-\u024f]|-[a-z0-9]|\.[a-z0-9_])"


def identifiers_named_in(text: str, identifiers: list[str]) -> int:
    """How many of ``identifiers`` (lower-case, from ``query_identifiers``) ``text`` names as a
    whole, in any case and in NFKC: not inside a longer word or identifier ("max_pool_size" does
    not name "pool_size"; "POOL_SIZE=10", "--pool_size 10" and "pool_sizeを" do). A plain
    substring test first, so that a 16 KB text without the identifier costs no pattern."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return sum(
        identifier in folded and re.search(_NAMED_BEFORE + re.escape(identifier) + _NAMED_AFTER, folded) is not None
        for identifier in identifiers
    )


_STEMMER = snowballstemmer.stemmer("english")
_STEM_LOCK = threading.Lock()


@functools.lru_cache(maxsize=100_000)
def stem(word: str) -> str:
    """The English stem of a lower-cased word; CJK bigrams and numbers as they are."""
    if word.isdigit() or _CJK_SCRIPT.search(word):
        return word
    with _STEM_LOCK:  # the stemmer keeps per-instance state while it works
        return _STEMMER.stemWord(word)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def lexical_terms(text: str, *, stemmed: bool = True) -> list[str]:
    """The terms of ``text``: CJK bigrams plus lower-cased words (their stems unless ``stemmed`` is
    False), in order."""
    text = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    position = 0
    for match in _CJK_RUN.finditer(text):
        terms += [w.lower() for w in _WORD.findall(text[position : match.start()])]
        terms += _bigrams(match.group())
        position = match.end()
    terms += [w.lower() for w in _WORD.findall(text[position:])]
    return [stem(term) for term in terms] if stemmed else terms


def date_terms(when: datetime) -> str:
    """'2024-03-05 2024-03 2024 march' — the forms people use to ask about a date."""
    return f"{when:%Y-%m-%d} {when:%Y-%m} {when:%Y} {when:%B}".lower()


def lexical_document(*, title: str, text: str, tags: list[str], occurred_at: datetime) -> str:
    """The text indexed by ``to_tsvector('simple', …)`` for one memory."""
    parts = [title, text, " ".join(tags), date_terms(occurred_at)]
    return " ".join(lexical_terms(" ".join(p for p in parts if p)))


# Query terms that match most of any corpus and say little: PostgreSQL's English stop words (the
# Snowball list of its ``english`` configuration), and CJK bigrams of hiragana alone (particles and
# verb endings: "した", "での", "につ"). They stay in every document; a query drops them unless it
# has nothing else: fewer matches to rank and better lexical ranking (bench/perf/analysis.md, "What
# changed"; bench/RESULTS.md, "Retrieval quality").
_STOP_WORDS_TEXT = """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this that these those
    am is are was were be been being have has had having do does did doing a an the and but if or because
    as until while of at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will just
    don should now"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
_HIRAGANA_ONLY = re.compile(r"[\u3040-\u309f]+")


def is_stop_term(term: str) -> bool:
    """Whether a query term is one of those that match most notes (``STOP_WORDS``, hiragana bigrams)."""
    return term in STOP_WORDS or _HIRAGANA_ONLY.fullmatch(term) is not None


def query_terms(query: str) -> list[str]:
    """The distinct terms a query matches on: its words and bigrams without stop terms (unless it
    has nothing else), stemmed. A masked value counts by its pseudonym alone, never by its label's
    words (``pii.pseudonyms_only``): "person" would match every note that names anyone."""
    terms = list(dict.fromkeys(lexical_terms(pseudonyms_only(query), stemmed=False)))
    terms = [t for t in terms if not is_stop_term(t)] or terms
    return list(dict.fromkeys(stem(t) for t in terms))


def lexical_query(query: str) -> str:
    """A ``to_tsquery('simple', …)`` string that matches any term of ``query_terms`` (ranked by
    BM25 in the database).

    Terms are quoted so that no character of the query is ever read as tsquery syntax.
    """
    return " | ".join("'" + term.replace("'", "''").replace("\\", "") + "'" for term in query_terms(query))
