"""Text normalisation for detection, with an exact map back to the original offsets.

Detection runs on a normalised copy of the text, so that spellings meant to slip past a pattern
look like the ASCII strings the recognizers expect:

- NFKC: full-width ``０９０－１２３４－５６７８`` and ``ａ＠ｂ．ｊｐ`` become ASCII;
- invisible characters removed (``INVISIBLE``): every format character (category Cf: zero-width
  spaces and joiners, direction marks and overrides, invisible operators, tag characters, the soft
  hyphen, …), variation selectors, the combining grapheme joiner and the Hangul fillers;
- digits of every script mapped to ASCII (Arabic-Indic ``٠٩٠``, Devanagari ``०९०``, …).

The regex detectors read a second, *folded* copy of the same length (``NormalizedText.folded``):
Cyrillic and Greek letters that look like Latin ones (``exаmple.com`` with a Cyrillic ``а``) and
the ideographic full stop (``example。com``) become their ASCII look-alikes. The name detector
reads the unfolded copy, where a Cyrillic or Greek name stays what it is.

Replacement happens in the *original* text, so every offset found in the normalised text must map
back. The text is normalised one grapheme cluster at a time (a base character with its combining
marks, or a half-width katakana with its voiced sound mark): NFKC never composes across a cluster
boundary that matters here, so each normalised character belongs to exactly one original cluster,
and a span of normalised characters maps back to the clusters it came from. Folding maps one
character to one character, so both copies share the map.
"""

import functools
import unicodedata
from dataclasses import dataclass

import regex

#: Every character removed before detection: format characters (category Cf), variation
#: selectors, Mongolian free variation selectors, the combining grapheme joiner, the Hangul fillers
#: and the Khmer inherent vowels.
INVISIBLE = regex.compile(
    r"[\p{Cf}\uFE00-\uFE0F\U000E0100-\U000E01EF\u180B-\u180D\u180F\u034F\u115F\u1160\u3164\uFFA0\u17B4\u17B5]"
)

#: Letters folded to the ASCII letter they look like, for the regex detectors only: Cyrillic,
#: Greek and Armenian look-alikes (full-width forms are NFKC's), and the ideographic full stop.
CONFUSABLES: dict[str, str] = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h",
    "ѵ": "v", "ү": "y", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T",
    "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y", "Ӏ": "I",
    # Greek
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "υ": "u", "χ": "x", "ε": "e", "τ": "t",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n",
    # Dotless i, and the ideographic full stop (NFKC turns the half-width one into it)
    "ı": "i", "。": ".",
}  # fmt: skip
_FOLD = str.maketrans(CONFUSABLES)

_GRAPHEME = regex.compile(r"\X")
_JAPANESE = regex.compile(r"[\p{Hiragana}\p{Katakana}\p{Han}]")
_NON_ASCII_DIGIT = regex.compile(r"[\p{Nd}--[0-9]]", regex.V1)


@dataclass(frozen=True)
class NormalizedText:
    """``text`` is the normalised form of an original string; ``folded`` is ``text`` with look-alike
    letters folded to ASCII (same length, same offsets).

    ``starts[i]`` and ``ends[i]`` are the bounds, in the original string, of the grapheme cluster
    that normalised character ``i`` came from. Both are ``None`` when the original was already
    normal (offsets are then identical).
    """

    text: str
    folded: str
    starts: tuple[int, ...] | None = None
    ends: tuple[int, ...] | None = None

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The original offsets of the non-empty normalised span ``[start, end)``.

        A span that begins or ends inside the expansion of one cluster (``㍻`` → ``平成``)
        widens to the whole cluster.
        """
        if self.starts is None or self.ends is None:
            return start, end
        return self.starts[start], self.ends[end - 1]


def normalize(text: str) -> NormalizedText:
    """``text`` NFKC-normalised, without invisible characters and with ASCII digits, keeping the
    offset map; and its folded copy."""
    if text.isascii():
        return NormalizedText(text, text)
    if (
        INVISIBLE.search(text) is None
        and unicodedata.is_normalized("NFKC", text)
        and _NON_ASCII_DIGIT.search(text) is None
    ):
        return NormalizedText(text, text.translate(_FOLD))
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for cluster in _GRAPHEME.findall(text):
        end = position + len(cluster)
        normal = _normalize_cluster(cluster)
        starts.extend([position] * len(normal))
        ends.extend([end] * len(normal))
        parts.append(normal)
        position = end
    normalized = "".join(parts)
    return NormalizedText(normalized, normalized.translate(_FOLD), tuple(starts), tuple(ends))


@functools.lru_cache(maxsize=4096)
def _normalize_cluster(cluster: str) -> str:
    cluster = INVISIBLE.sub("", cluster)
    normal = unicodedata.normalize("NFKC", cluster)
    if _NON_ASCII_DIGIT.search(normal):
        normal = "".join(
            str(unicodedata.decimal(char)) if unicodedata.category(char) == "Nd" else char for char in normal
        )
    return normal


def detect_language(text: str) -> str:
    """``"ja"`` when the text contains kana or kanji, otherwise ``"en"``."""
    return "ja" if _JAPANESE.search(text) else "en"
