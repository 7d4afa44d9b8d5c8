"""Questions that ask when, and memories that say when.

"When did Jonas move in?" is answered by a turn such as "He arrived on the first of the month",
which shares no word with the question but states a time. Of the long-conversation set's
questions that ask when, 174 of 190 evidence turns state a time (a weekday, a month, "yesterday",
"last week", "two days", a date, a clock time), against about a third of all turns
(bench/RESULTS.md, "Questions that ask when"). ``search.times_for_when_questions`` adds a bonus
to such candidates for such questions; nothing else reads these patterns.

``TIME_PATTERN`` is a PostgreSQL regular expression (the candidates' texts are matched in the
database, ``candidates.stating_a_time``); ``states_a_time`` is the same pattern in Python, for
tests and benchmarks. English and Japanese.
"""

import re


def _either_case(word: str) -> str:
    """``word`` with its first letter in either case ("Monday" or "monday"): the pattern is matched
    case-sensitively so that "May" (the month) and "may" (the verb) differ."""
    return f"[{word[0].upper()}{word[0]}]{word[1:]}"


_WORDS = (
    "monday tuesday wednesday thursday friday saturday sunday"
    # "May" and "March" only capitalised (below): "may" and "march" are verbs.
    " january february april june july august september october november december"
    " yesterday today tonight tomorrow weekend weekends ago recently lately overnight"
    " christmas easter halloween thanksgiving midsummer"
)
_NAMED = [_either_case(w) for w in [*_WORDS.split(), "new year", "boxing day"]] + ["May", "March"]
_DEICTIC = r"(?:[Ll]ast|[Tt]his|[Nn]ext|[Tt]he other|[Tt]he following|[Tt]he previous|[Ee]arlier this|[Ll]ater this)"
_PERIOD = r"(?:morning|afternoon|evening|night|day|week|month|year|spring|summer|autumn|fall|winter|time)"
_COUNT = (
    r"(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|several|few|a few|couple of"
    r"|a couple of)"
)
_UNIT = r"(?:seconds?|minutes?|hours?|days?|nights?|weeks?|fortnights?|months?|years?|decades?)"
_ORDINAL_OF = (
    r"(?:\d{1,2}(?:st|nd|rd|th)|[Ff]irst|[Ss]econd|[Tt]hird|[Ff]ourth|[Ff]ifth|[Tt]enth|[Tt]welfth"
    r"|[Tt]wentieth|[Tt]hirtieth) of|[Tt]he \d{1,2}(?:st|nd|rd|th)"
)
_CLOCK_AND_DATES = r"\d{1,2}(?::\d\d)? ?(?:am|pm|a\.m|p\.m)|\d{1,2}:\d\d|\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}|(?:19|20)\d\d"
_ENGLISH = rf"(?:{'|'.join(_NAMED)})|{_DEICTIC} {_PERIOD}|{_COUNT} {_UNIT}|{_ORDINAL_OF}|{_CLOCK_AND_DATES}|o'clock"
_JAPANESE = (
    r"昨日|今日|明日|一昨日|先週|今週|来週|先月|今月|来月|去年|昨年|今年|来年|週末|年末|年始|午前|午後|前日|翌日"
    r"|[0-9０-９]+[年月日時]|[月火水木金土日]曜"
    r"|[0-9０-９一二三四五六七八九十]+(?:日間|週間|か月|ヶ月|カ月|年間|時間|分間)"
)


def _pattern(boundary: str) -> str:
    return rf"{boundary}(?:{_ENGLISH}){boundary}|{_JAPANESE}"


# A PostgreSQL regular expression (``\y``: a word boundary) for a text that states a time.
TIME_PATTERN = _pattern(r"\y")
_TIME = re.compile(_pattern(r"\b"))

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


def states_a_time(text: str) -> bool:
    """Whether ``text`` holds a time expression of ``TIME_PATTERN`` (Python's reading of it)."""
    return bool(_TIME.search(text))
