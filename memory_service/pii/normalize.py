"""Text normalisation for detection, with an exact map back to the original offsets.

Detection runs on NFKC-normalised text with zero-width characters removed, so full-width
``０９０－１２３４－５６７８``, ``ａ＠ｂ．ｊｐ`` and ``ali\\u200bce@example.com`` look like the ASCII
strings the recognizers expect. Replacement happens in the *original* text, so every offset found
in the normalised text must map back.

The text is normalised one grapheme cluster at a time (a base character with its combining marks,
or a half-width katakana with its voiced sound mark): NFKC never composes across a cluster
boundary that matters here, so each normalised character belongs to exactly one original cluster,
and a span of normalised characters maps back to the clusters it came from.
"""

import functools
import unicodedata
from dataclasses import dataclass

import regex

#: Removed before detection: zero-width space, non-joiner, joiner, word joiner, byte-order mark
#: and soft hyphen. They are invisible, so they can hide PII from a pattern.
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad")

_GRAPHEME = regex.compile(r"\X")
_JAPANESE = regex.compile(r"[\p{Hiragana}\p{Katakana}\p{Han}]")


@dataclass(frozen=True)
class NormalizedText:
    """``text`` is the normalised form of an original string.

    ``starts[i]`` and ``ends[i]`` are the bounds, in the original string, of the grapheme cluster
    that normalised character ``i`` came from. Both are ``None`` when the original was already
    normal (offsets are then identical).
    """

    text: str
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
    """NFKC-normalise ``text`` and drop zero-width characters, keeping the offset map."""
    if text.isascii() or (not ZERO_WIDTH.intersection(text) and unicodedata.is_normalized("NFKC", text)):
        return NormalizedText(text)
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for cluster in _GRAPHEME.findall(text):
        end = position + len(cluster)
        normal = _normalize_cluster(cluster)
        if len(normal) == 1:
            starts.append(position)
            ends.append(end)
        elif normal:
            starts.extend([position] * len(normal))
            ends.extend([end] * len(normal))
        parts.append(normal)
        position = end
    return NormalizedText("".join(parts), tuple(starts), tuple(ends))


@functools.lru_cache(maxsize=4096)
def _normalize_cluster(cluster: str) -> str:
    if ZERO_WIDTH.intersection(cluster):
        cluster = "".join(char for char in cluster if char not in ZERO_WIDTH)
    return unicodedata.normalize("NFKC", cluster)


def detect_language(text: str) -> str:
    """``"ja"`` when the text contains kana or kanji, otherwise ``"en"``."""
    return "ja" if _JAPANESE.search(text) else "en"
