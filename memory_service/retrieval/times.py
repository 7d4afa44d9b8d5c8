"""Questions that ask when, and memories that say when.

"When did Jonas move in?" is answered by a turn such as "He arrived on the first of the month",
which shares no word with the question but states a time. On the training half of the
long-conversation set, 87 of the 95 evidence turns of the questions that ask when state a time (a
weekday, a month, "yesterday", "last week", "two days", a date, a clock time), against 589 of its
1,693 turns (bench/RESULTS.md, "Questions that ask when"). ``search.times_for_when_questions``
adds a bonus to such candidates for such questions; nothing else reads these patterns.

English and Japanese. The candidates' titles and texts are read in one statement and matched
here (``candidates.stating_a_time``).
"""

import re
from itertools import pairwise

from memory_service.retrieval.lexical import CJK_SCRIPT_CLASS

# Words that state a time alone; "May" and "March" only capitalised ("may", "march" are verbs).
_TIME_WORDS_TEXT = """monday tuesday wednesday thursday friday saturday sunday january february april june july
    august september october november december yesterday today tonight tomorrow weekend weekends ago
    recently lately overnight christmas easter halloween thanksgiving midsummer"""
_TIME_WORDS = frozenset(_TIME_WORDS_TEXT.split())
_CAPITALISED_MONTHS = re.compile(r"\b(?:May|March)\b")
# Two words that state a time together: "last week", "following day", "two days", "a few weeks",
# "couple of months", "(the first of) the month", "new year", "boxing day", "o'clock".
_PAIRS_TEXT = {
    "before a period": "last this next other following previous",
    "period": "morning afternoon evening night day week month year spring summer autumn fall winter time",
    "count": "a an one two three four five six seven eight nine ten eleven twelve several few couple",
    "unit": """second seconds minute minutes hour hours day days night nights week weeks fortnight
        fortnights month months year years decade decades""",
}
_PAIR_WORDS = {kind: text.split() for kind, text in _PAIRS_TEXT.items()}
_TIME_PAIRS = frozenset(
    [(w, p) for w in _PAIR_WORDS["before a period"] for p in _PAIR_WORDS["period"]]
    + [(c, u) for c in _PAIR_WORDS["count"] for u in _PAIR_WORDS["unit"]]
    + [("the", "month"), ("new", "year"), ("boxing", "day"), ("o", "clock")]
)
_LETTERS = re.compile(r"[^\W\d_]+")
_AGE = re.compile(r"-(?:year|month|week|day)s?-old")  # "a twelve-year-old cat" is no time
# Forms with digits: "10:30", "7 pm", "2025-03-04", "3/4", "2024", "2 days", "3rd of", "the 27th".
_DIGIT_FORMS = re.compile(
    r"\b(?:\d{1,2}(?::\d\d)? ?(?:am|pm|a\.m|p\.m)|\d{1,2}:\d\d|\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}|(?:19|20)\d\d"
    r"|\d+ (?:seconds?|minutes?|hours?|days?|nights?|weeks?|fortnights?|months?|years?|decades?)"
    r"|\d{1,2}(?:st|nd|rd|th) of)\b|\b[Tt]he \d{1,2}(?:st|nd|rd|th)\b"
)
_HAS_DIGIT = re.compile(r"\d")
_CJK = re.compile(CJK_SCRIPT_CLASS)
_JAPANESE = re.compile(
    r"昨日|今日|明日|一昨日|先週|今週|来週|先月|今月|来月|去年|昨年|今年|来年|週末|年末|年始|午前|午後|前日|翌日"
    r"|[0-9０-９]+[年月日時]|[月火水木金土日]曜"
    r"|[0-9０-９一二三四五六七八九十]+(?:日間|週間|か月|ヶ月|カ月|年間|時間|分間)"
)


def states_a_time(text: str) -> bool:
    """Whether ``text`` states a time: a weekday, a month, a holiday, "yesterday", "ago"; "last week",
    "following day", "two days", "a few weeks", "the month"; a clock time, a date, a
    year, "the 27th"; in Japanese 昨日, 先週, 3日, 金曜, 3日間. Sets of words and word pairs rather
    than one regular expression over the text: a few µs a turn, where one pattern holding every form
    took ~25 µs in Python and ~50 µs in PostgreSQL (bench/RESULTS.md, "Questions that ask when")."""
    if _HAS_DIGIT.search(text) and _DIGIT_FORMS.search(text):
        return True
    if _CJK.search(text) and _JAPANESE.search(text):
        return True
    if _CAPITALISED_MONTHS.search(text):
        return True
    lowered = text.lower()
    if "-old" in lowered:
        lowered = _AGE.sub(" ", lowered)
    words = _LETTERS.findall(lowered.replace("couple of", "couple"))
    return not _TIME_WORDS.isdisjoint(words) or not _TIME_PAIRS.isdisjoint(pairwise(words))


# A question that asks when: its opening ("When did …", "What day …", "How long …") or, in
# Japanese, いつ / 何日 / 何曜 / 何月 / 何年 / 何時 anywhere. "When the build broke, why …" asks why.
_AUXILIARY = r"(?:did|does|do|was|were|is|are|will|would|has|have|had|can|could|should|must)"
_ASKS_WHEN = re.compile(
    rf"^\W*(?:when {_AUXILIARY}|what (?:day|date|time|month|year|week|weekday)|which (?:day|date|month|year|week"
    r"|weekday)|on (?:what|which) (?:day|date)|how long|since when|in (?:what|which) (?:month|year)|by when"
    r"|until when|at what time)\b"
    r"|いつ|何日|何曜|何月|何年|何時",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks when something happened or how long it took."""
    return bool(_ASKS_WHEN.search(query))
