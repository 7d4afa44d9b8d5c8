"""A question that asks when lifts the candidates that state a time (``search.times_for_when_questions``):
the question and the candidates' titles and texts read in Python (``times.asks_when``,
``times.states_a_time``; ``candidates.stating_a_time`` reads them under the tenant's row-level
security), real masking, real search."""

import uuid
from dataclasses import replace

import pytest

from memory_service.retrieval import candidates
from memory_service.retrieval.search import RANKING, times_for_when_questions
from memory_service.retrieval.times import asks_when, states_a_time
from tenants.context import tenant_context
from tests.memories.searching import search_scores, write_note

pytestmark = pytest.mark.django_db

# The question's words are in Tobias's turn; Ines's first turn says when.
TURNS = [
    "Ines: He arrived on Tuesday with four boxes and a bike.",
    "Tobias: So your brother finally moved in with you? Brave.",
    "Ines: The hall is full of his boxes now.",
]
QUESTION = "When did Ines's brother move in with her?"

ASKS_WHEN = [
    "When did Jonas move in?",
    "when was the launch",
    "  What day did the van arrive?",
    "Which month was the party?",
    "On what date was the contract signed?",
    "How long did the cutover take?",
    "Since when has the cache been on?",
    "At what time does the job run?",
    "threeds_v2 の展開が100%に達したのはいつ?",
    "バックアップは何日分残る?",
    "When's the launch?",
    "How many days did the cutover take?",
    "何週間かかった?",
]
ASKS_SOMETHING_ELSE = [
    "When the build broke, why did the deploy go on?",
    "What did Jonas bring when he moved in?",
    "Who moved in with Ines?",
    "What is the connection pool size?",
    "How many boxes did he bring?",
    "接続プールの上限は?",
    "When should I run the migrations?",
    "What time zone is the server in?",
    "いつも失敗するテストは?",
]

STATES_A_TIME = [
    "He arrived on Tuesday.",
    "we went yesterday",
    "Last week the boat was launched.",
    "It took two days.",
    "a couple of weeks ago",
    "We're launching on the 27th!",
    "on the first of the month",
    "In May we moved.",
    "May we meet? In May, yes.",
    "Since May you have led the team.",
    "Back in May I went.",
    "On 3 May I flew.",
    "From mid-May we rested.",
    "The job runs at 10:30 every night.",
    "Meet at 7pm.",
    "Released 2025-03-04.",
    "Over Christmas the office was closed.",
    "Happy New Year!",
    "Five days with no wifi.",
    "A couple of months later it broke.",
    "Meet at 7 PM.",
    "Lunch at noon.",
    "That night we left.",
    "In 2024 we moved.",
    "三月に移行した。",
    "今朝、デプロイした。",
    "昨日、移行した。",
    "3日間かかった。",
    "11月10日に100%に到達した。",
    "先週の金曜に決めた。",
]
STATES_NO_TIME = [
    "It may rain, and we march on.",
    "May I ask what you think? May we join?",
    "Sorry, May i ask? May You join?",
    "Seventh out of nine in the slow race.",
    "The pool size is 10 with no overflow.",
    "Use `max_retries=3` for the client.",
    "The daylight was lovely.",
    "She has a twelve-year-old cat.",
    "First, the pool; then the second of the two tasks.",
    "Get a second opinion. This time use the replica.",
    "Poll three times a day, once a week in staging.",
    "NFS listens on port 2049 with 24/7 support, a 50/50 split.",
    "See search.py:12:34 for the check.",
    "接続プールの上限は10にする。",
]


def _scores(tenant, query=QUESTION, ranking=RANKING) -> dict[str, float]:
    return search_scores(tenant, query, ranking)


@pytest.mark.parametrize(
    ("query", "expected"), [(q, True) for q in ASKS_WHEN] + [(q, False) for q in ASKS_SOMETHING_ELSE]
)
def test_a_question_asks_when_by_its_opening_or_a_japanese_question_word(query, expected):
    assert asks_when(query) is expected


@pytest.mark.parametrize(
    ("text", "expected"), [(t, True) for t in STATES_A_TIME] + [(t, False) for t in STATES_NO_TIME]
)
def test_a_text_states_a_time_by_its_words_dates_and_clock_times(text, expected):
    assert states_a_time(text) is expected


def test_the_candidates_that_state_a_time_are_read_from_the_database(api_client, tenant):
    texts = STATES_A_TIME + STATES_NO_TIME
    ids = [uuid.UUID(write_note(api_client, text)) for text in texts]
    with tenant_context(tenant.id):
        stating = candidates.stating_a_time(ids)
    assert stating == {i for i, text in zip(ids, texts, strict=True) if text in STATES_A_TIME}


def test_a_title_that_states_a_time_counts(api_client, tenant):
    response = api_client.post(
        "/api/v1/memories",
        {"scope": "user", "user": "u1", "title": "Cutover on Saturday", "text": "The database moved to 16."},
        format="json",
    )
    assert response.status_code == 201, response.content
    memory_id = uuid.UUID(response.json()["id"])
    with tenant_context(tenant.id):
        assert candidates.stating_a_time([memory_id]) == {memory_id}


def test_a_when_question_lifts_the_candidates_that_state_a_time(api_client, tenant):
    ids = [write_note(api_client, text) for text in TURNS]
    without = _scores(tenant, ranking=replace(RANKING, when=0.0))
    scores = _scores(tenant)
    bonus = RANKING.when
    assert bonus == 0.3

    assert set(scores) == set(without) and set(ids) <= set(scores)
    for memory_id, score in scores.items():
        assert score == pytest.approx(without[memory_id] + (bonus if memory_id == ids[0] else 0.0))
    # Without the bonus the turn sharing the question's words ranks above the one that says when.
    assert without[ids[1]] > without[ids[0]]
    assert scores[ids[0]] > scores[ids[1]]


def test_a_question_that_does_not_ask_when_moves_nothing(api_client, tenant):
    for text in TURNS:
        write_note(api_client, text)
    query = "What did Ines's brother bring when he moved in?"
    assert _scores(tenant, query, replace(RANKING, when=0.3)) == pytest.approx(
        _scores(tenant, query, replace(RANKING, when=0.0))
    )


def test_another_tenant_never_learns_which_memory_states_a_time(api_client, tenant, other_tenant):
    ids = [uuid.UUID(write_note(api_client, text)) for text in TURNS]
    with tenant_context(tenant.id):
        assert candidates.stating_a_time(ids) == {ids[0]}
    with tenant_context(other_tenant.id):
        assert candidates.stating_a_time(ids) == set()


def test_only_candidates_the_bonus_could_bring_into_the_results_are_read(api_client, tenant):
    ids = [uuid.UUID(write_note(api_client, text)) for text in TURNS]  # the first states a time
    with tenant_context(tenant.id):

        def lifted(first, top, pinned=frozenset()):
            scores = {ids[0]: first, ids[1]: 1.0, ids[2]: 0.9}
            return times_for_when_questions(scores, masked=QUESTION, bonus=0.3, top=top, pinned=pinned)[ids[0]]

        # Two results: the second best is 0.9, so a turn at 0.6 or more could reach them with 0.3.
        assert lifted(0.61, top=2) == pytest.approx(0.91)
        assert lifted(0.6, top=2) == pytest.approx(0.9)
        assert lifted(0.59, top=2) == 0.59  # not read: it stays out of the results either way
        # One result: the best is 1.0.
        assert lifted(0.69, top=1) == 0.69
        assert lifted(0.7, top=1) == pytest.approx(1.0)
        # A pinned memory ranks first whatever its score: it is always read.
        assert lifted(0.1, top=1, pinned={ids[0]}) == pytest.approx(0.4)
        # As many results as candidates: every one is read.
        assert lifted(0.1, top=3) == pytest.approx(0.4)


def test_a_long_note_is_read_for_a_time_in_its_first_thousand_characters(api_client, tenant):
    filler = "The pool size stays at ten with no overflow. " * 40  # 1,800 characters that state no time
    early = uuid.UUID(write_note(api_client, "Decided on Tuesday. " + filler))
    late = uuid.UUID(write_note(api_client, filler + "Decided on Tuesday."))
    with tenant_context(tenant.id):
        assert candidates.stating_a_time([early, late]) == {early}
    assert candidates.TIME_READ_CHARS == 1000 and states_a_time(filler + "Decided on Tuesday.")
