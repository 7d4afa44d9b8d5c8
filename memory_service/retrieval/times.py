"""Questions that ask when, memories that say when, and the periods a question names.

"When did Jonas move in?" is answered by a turn such as "He arrived on the first of the month",
which shares no word with the question but states a time. On the training half of the
long-conversation set, 90 of the 95 evidence turns of the questions that ask when state a time (a
weekday, a month, "yesterday", "last week", "two days", a date, a clock time), against 597 of its
1,693 turns (bench/RESULTS.md, "Questions that ask when"). ``search.times_for_when_questions``
adds a bonus to such candidates for such questions; nothing else reads these patterns.

A question that names a period ("What caused the consumer lag in March 2026?", "2026年5月に何を
決めた?") asks about what happened then: ``periods_named`` reads the months (or, failing those, the
years) it names, and ``search.periods_named_first`` adds a bonus to the candidates that occurred
within one (``candidates.occurring_within``).

English and Japanese. The candidates' titles and texts are read in one statement and matched
here (``candidates.stating_a_time``).
"""

import re
import unicodedata
from datetime import UTC, datetime
from itertools import pairwise

from memory_service.pii import text_for_embedding
from memory_service.retrieval.lexical import script_of

# Words that state a time alone; "May" and "March" as months only capitalised ("may", "march" are
# verbs), and "May" before "I", "we" or "you" only after a lower-case word or a number and a space,
# or a hyphen ("In May we moved", "On 3 May I flew", "mid-May I left"; not "May I ask …", "Sorry,
# May i ask").
_TIME_WORDS_TEXT = """monday tuesday wednesday thursday friday saturday sunday january february april june july
    august september october november december yesterday today tonight tomorrow weekend weekends ago
    recently lately overnight noon midnight christmas easter halloween thanksgiving midsummer"""
_TIME_WORDS = frozenset(_TIME_WORDS_TEXT.split())
_CAPITALISED_MONTHS = re.compile(r"\bMarch\b|\bMay\b(?! (?:[Ii]|[Ww]e|[Yy]ou)\b)|(?<=[a-z0-9] )May\b|(?<=-)May\b")
# Two words that state a time together: "last week", "that night", "the following day", "two days",
# "a few weeks", "couple of months", "(the first of) the month", "new year", "boxing day", "o'clock".
# Not "this time" or "a second": no time is stated.
_PAIRS_TEXT = {
    "before a period": "last this next that same other following previous",
    "period": "morning afternoon evening night day week month year spring summer autumn fall winter",
    "count": "a an one two three four five six seven eight nine ten eleven twelve several few couple",
    "unit": """minute minutes hour hours day days night nights week weeks fortnight fortnights month months
        year years decade decades""",
}
_PAIR_WORDS = {kind: text.split() for kind, text in _PAIRS_TEXT.items()}
_TIME_PAIRS = frozenset(
    [(w, p) for w in _PAIR_WORDS["before a period"] for p in _PAIR_WORDS["period"]]
    + [(c, u) for c in _PAIR_WORDS["count"] for u in _PAIR_WORDS["unit"]]
    + [(c, "seconds") for c in _PAIR_WORDS["count"] if c not in ("a", "an", "one")]  # "a second": no time
    + [("the", "month"), ("new", "year"), ("boxing", "day"), ("o", "clock")]
)
_LETTERS = re.compile(r"[^\W\d_]+")
# No time: an age ("a twelve-year-old cat") or a rate ("three times a day", "once a week", "per hour").
_AGE = re.compile(r"-(?:year|month|week|day)s?-old")
_RATE = re.compile(r"\b(?:times|once|twice|per)(?: (?:an?|one))? [a-z]+\b")
_RATE_WORDS = ("times ", "once ", "twice ", "per ")
# Forms with digits: "10:30", "7 pm", "2025-03-04", "3/4" (month/day), "in 2024", "2 days", "3rd of",
# "the 27th"; not "24/7", "50/50", "file.py:12:34" or "port 2049".
_DIGIT_FORMS = re.compile(
    r"\b(?:\d{1,2}(?::\d\d)? ?(?i:am|pm|a\.m|p\.m)|\d{4}-\d\d-\d\d|(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])"
    r"|\d+ (?:seconds?|minutes?|hours?|days?|nights?|weeks?|fortnights?|months?|years?|decades?)"
    r"|\d{1,2}(?:st|nd|rd|th) of)\b"
    r"|(?<![:\d])\b\d{1,2}:[0-5]\d\b(?!:\d)"
    r"|\b(?:[Ii]n|[Ss]ince|[Bb]y|[Uu]ntil|[Ff]rom|[Oo]f|[Dd]uring|[Bb]efore|[Aa]fter) (?:19|20)\d\d\b"
    r"|\b[Tt]he \d{1,2}(?:st|nd|rd|th)\b"
)
_HAS_DIGIT = re.compile(r"\d")
_JAPANESE = re.compile(
    r"昨日|今日|明日|一昨日|今朝|昨夜|昨晩|先日|最近|先週|今週|来週|先月|今月|来月|去年|昨年|今年|来年|半年|週末|月末|月初"
    r"|年末|年始|午前|午後|前日|翌日|[0-9０-９]+[年月日時]|[一二三四五六七八九十]+月|[月火水木金土日]曜"
    r"|[0-9０-９一二三四五六七八九十]+(?:日間|週間|か月|ヶ月|カ月|年間|時間|分間)"
)


def states_a_time(text: str) -> bool:
    """Whether ``text`` states a time: a weekday, a month, a holiday, "yesterday", "ago", "noon";
    "last week", "that night", "the following day", "two days", "a few weeks", "the month"; a clock
    time, a date, "in 2024", "the 27th"; in Japanese 昨日, 先週, 3日, 三月, 金曜, 3日間. Sets of words and
    word pairs rather than one regular expression over the text: ~10 µs a turn, where one pattern
    holding every form took ~25 µs in Python and ~50 µs in PostgreSQL (bench/RESULTS.md, "Questions
    that ask when")."""
    if "<" in text:
        text = text_for_embedding(text)  # a masked value's pseudonym digits are no date
    if _HAS_DIGIT.search(text) and _DIGIT_FORMS.search(text):
        return True
    if script_of(text) == "cjk" and _JAPANESE.search(text):
        return True
    if _CAPITALISED_MONTHS.search(text):
        return True
    lowered = text.lower()
    if "-old" in lowered:
        lowered = _AGE.sub(" ", lowered)
    if any(word in lowered for word in _RATE_WORDS):
        lowered = _RATE.sub(" ", lowered)
    words = _LETTERS.findall(lowered.replace("couple of", "couple"))
    return not _TIME_WORDS.isdisjoint(words) or not _TIME_PAIRS.isdisjoint(pairwise(words))


# A question that asks when: its opening ("When did …", "When's …", "What day …", "How long …",
# "How many days …") or, in Japanese, いつ (not いつも, いつでも, いつか), 何日, 何曜, 何月, 何年, 何時,
# 何週間, 何か月 anywhere. "When the build broke, why …" asks why; "When should I …", "When can we …"
# ask on what condition; "What time zone …", "What date format …" ask neither.
_AUXILIARY = r"(?:did|does|do|was|were|is|are|will|would|has|have|had)"
_ASKS_WHEN = re.compile(
    rf"^\W*(?:when {_AUXILIARY}|when's"
    r"|what (?:day|date|time|month|year|week|weekday)(?! ?(?:zones?|formats?|stamps?)\b)"
    r"|which (?:day|date|month|year|week|weekday)|on (?:what|which) (?:day|date)|(?:for )?how long|since when"
    r"|in (?:what|which) (?:month|year)|by when|until when|at what time|what was the date"
    r"|how many (?:days|weeks|months|years|hours|minutes)|how much time)\b"
    r"|いつ(?!も|でも|か|の間)|何日|何曜|何月|何年|何時|何週間|何か月|何ヶ月|何カ月",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks when something happened or happens, or how long it took."""
    return bool(_ASKS_WHEN.search(query))


# A month with its year: "March 2026", "Mar. 2026", "March of 2026", "March 3, 2026", "March 3 2026",
# "3 March 2026", "2026-03", "2026-03-05", "2026/3", "2026/3/5", "2026.03.05", "2026年3月"; a year
# alone: "in 2024", "2024年" — not in a word or code ("FY2025", "a1b2024c", "v2.2024") nor before a
# unit ("2000 ms").
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_NAME = (
    r"(?P<name>(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?))\.?"
)
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?:3[01]|[12]\d|0?[1-9])"
_MONTH_YEAR = re.compile(
    rf"\b{_MONTH_NAME}(?:,? (?:of )?| \d{{1,2}}(?:st|nd|rd|th)?(?:, ?| )){_YEAR}\b"
    rf"|\b(?P<iso_year>(?:19|20)\d\d)(?:[-/](?P<iso_month>1[0-2]|0?[1-9])(?:[-/]{_DAY})?(?![\d/])"
    rf"|\.(?P<dot_month>0[1-9]|1[0-2])(?:\.{_DAY})?(?![\d.]))"
    r"|(?P<ja_year>(?:19|20)\d\d)年\s*(?P<ja_month>1[0-2]|0?[1-9])月"
)
_YEAR_ALONE = re.compile(
    r"(?<![A-Za-z0-9.:/-])(?P<year>(?:19|20)\d\d)(?![A-Za-z0-9.:/-])(?!\s?(?:(?i:ms|s|sec|kb|mb|gb|px)\b|%))"
)


def periods_named(query: str) -> list[tuple[datetime, datetime]]:
    """The periods (UTC, ``[start, end)``) the masked ``query`` names: each month it names with its
    year ("March 2026", "Mar. 2026", "March 3, 2026", "2026-03-05", "2026/3/5", "2026年3月": the
    month, not the day); if it names none, each year it names alone ("in 2024", "2024年の年末セール").
    A masked value's digits are none (``pii.text_for_embedding``); "May 2026" is a month whatever
    its case; full-width digits count (NFKC)."""
    if "<" in query:
        query = text_for_embedding(query)
    query = unicodedata.normalize("NFKC", query)  # "２０２６年５月", an ideographic space
    months = []
    for match in _MONTH_YEAR.finditer(query):
        if match["name"] is not None:
            months.append((int(match["year"]), _month_number(match["name"])))
        elif match["iso_year"] is not None:
            months.append((int(match["iso_year"]), int(match["iso_month"] or match["dot_month"])))
        else:
            months.append((int(match["ja_year"]), int(match["ja_month"])))
    if months:
        return [_month(year, month) for year, month in dict.fromkeys(months)]
    years = dict.fromkeys(int(match["year"]) for match in _YEAR_ALONE.finditer(query))
    return [(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)) for year in years]


def _month_number(name: str) -> int:
    return _MONTHS.index(name.lower()[:3]) + 1


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    return datetime(year, month, 1, tzinfo=UTC), datetime(*following, 1, tzinfo=UTC)
