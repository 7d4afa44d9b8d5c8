"""A candidate that occurred within a period the query names gains ``Ranking.period``
(``search.periods_named_first``): the periods read from the query (``times.periods_named``), the
candidates' times read under the tenant's row-level security (``candidates.occurring_within``),
real masking, real search."""

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memory_service.retrieval import candidates
from memory_service.retrieval.search import RANKING, periods_named_first
from memory_service.retrieval.times import periods_named
from tenants.context import tenant_context
from tests.memories.searching import search_scores, write_note

pytestmark = pytest.mark.django_db


def _month(year, month):
    return (year, month, 1), (year + (month == 12), month % 12 + 1, 1)


def _year(year):
    return (year, 1, 1), (year + 1, 1, 1)


PERIODS = [
    ("What caused the consumer lag in March 2026?", [_month(2026, 3)]),
    ("in Mar. 2026", [_month(2026, 3)]),
    ("March 3, 2026 and 3 March 2027", [_month(2026, 3), _month(2027, 3)]),
    ("the 1st of June 2025", [_month(2025, 6)]),
    ("decided in december of 2025", [_month(2025, 12)]),
    ("What happened on 2025-03-04?", [_month(2025, 3)]),
    ("the 2024-12 freeze", [_month(2024, 12)]),
    ("2026年5月にモデルレジストリについて何を決めた?", [_month(2026, 5)]),
    ("2026/3の障害", [_month(2026, 3)]),
    ("2024年の年末セールでスケールアウトが止まった原因は?", [_year(2024)]),
    ("What changed in 2025 and 2026?", [_year(2025), _year(2026)]),
    ("Why did 2024 sales drop? 2000 s, 2000s, 2000 MB, 2000%", [_year(2024)]),
    ("What did <PERSON_20241a2b3c4d> do in 2023?", [_year(2023)]),
    ("When did the pool size change?", []),
    ("Why did May leave the team?", []),
    ("Set the timeout to 2000 ms.", []),
    ("v2.2024 and 10:2024, FY2025 and commit a1b2024c", []),
    ("２０２６年５月の障害", [_month(2026, 5)]),
    ("2026/3/5の障害", [_month(2026, 3)]),
    ("released 2026.03.05", [_month(2026, 3)]),
    ("March 3 2026", [_month(2026, 3)]),
]


def _as_datetimes(expected):
    return [(datetime(*start, tzinfo=UTC), datetime(*end, tzinfo=UTC)) for start, end in expected]


def _write(client, text, occurred_at):
    return write_note(client, text, occurred_at=occurred_at)


# Three consumer-lag incidents; the question names the month of the second, which words it least alike.
INCIDENTS = [
    ("Consumer lag on the orders topic was caused by one hot partition.", "2026-01-14T09:00:00Z"),
    (
        "Rebalance storm after the deploy: the group kept stopping and the consumers fell behind.",
        "2026-03-20T09:00:00Z",
    ),
    ("Consumer lag on the clickstream topic was caused by the writer's request size limit.", "2026-05-02T09:00:00Z"),
]
QUESTION = "What caused the consumer lag in March 2026?"


@pytest.mark.parametrize(("query", "expected"), PERIODS)
def test_the_periods_a_query_names_are_months_with_their_year_or_else_years(query, expected):
    assert periods_named(query) == _as_datetimes(expected)


def test_the_candidates_that_occurred_within_a_period_are_read_from_the_database(api_client, tenant):
    ids = [uuid.UUID(_write(api_client, text, at)) for text, at in INCIDENTS]
    edge = uuid.UUID(_write(api_client, "A note at the month's last second.", "2026-03-31T23:59:59Z"))
    after = uuid.UUID(_write(api_client, "A note at the next month's first second.", "2026-04-01T00:00:00Z"))
    with tenant_context(tenant.id):
        within = candidates.occurring_within([*ids, edge, after], periods_named(QUESTION))
        whole_year = candidates.occurring_within([*ids, edge, after], periods_named("in 2026"))
    assert within == {ids[1], edge}
    assert whole_year == {*ids, edge, after}


def test_a_question_naming_a_month_lifts_what_occurred_in_it_past_a_note_sharing_its_words(
    api_client, tenant, embed_all
):
    ids = [_write(api_client, text, at) for text, at in INCIDENTS]
    embed_all()
    without = search_scores(tenant, QUESTION, replace(RANKING, period=0.0))
    scores = search_scores(tenant, QUESTION)
    bonus = RANKING.period
    assert bonus == 0.3

    assert set(scores) == set(without) == set(ids)
    for memory_id, score in scores.items():
        assert score == pytest.approx(without[memory_id] + (bonus if memory_id == ids[1] else 0.0))
    # Without it an incident that shares more of the question's words ranks above the one of March.
    assert without[ids[2]] > without[ids[1]]
    assert scores[ids[1]] > scores[ids[2]]


def test_a_query_naming_no_period_moves_nothing(api_client, tenant, embed_all):
    for text, at in INCIDENTS:
        _write(api_client, text, at)
    embed_all()
    query = "What caused the consumer lag?"
    assert search_scores(tenant, query) == pytest.approx(search_scores(tenant, query, replace(RANKING, period=0.0)))


def test_only_candidates_the_bonus_could_bring_into_the_results_are_read(api_client, tenant):
    ids = [uuid.UUID(_write(api_client, text, at)) for text, at in INCIDENTS]  # the second is in March
    with tenant_context(tenant.id):

        def lifted(second, top, pinned=frozenset()):
            scores = {ids[0]: 1.0, ids[1]: second, ids[2]: 0.9}
            return periods_named_first(scores, masked=QUESTION, bonus=0.3, top=top, pinned=pinned)[ids[1]]

        assert lifted(0.61, top=2) == pytest.approx(0.91)
        assert lifted(0.59, top=2) == 0.59  # not read: it stays out of the results either way
        assert lifted(0.1, top=1, pinned={ids[1]}) == pytest.approx(0.4)  # pinned: always read


def test_another_tenant_never_learns_when_a_memory_occurred(api_client, tenant, other_client, other_tenant):
    ids = [uuid.UUID(_write(api_client, text, at)) for text, at in INCIDENTS]
    theirs = _write(other_client, INCIDENTS[1][0], INCIDENTS[1][1])
    with tenant_context(other_tenant.id):
        assert candidates.occurring_within(ids, periods_named(QUESTION)) == set()
    assert set(search_scores(other_tenant, QUESTION)) == {theirs}
