"""A candidate that names the query's identifier gains ``Ranking.identifier`` (``search.identifiers_named``):
the query's identifiers (``lexical.query_identifiers``), whether a text names one as a whole
(``lexical.identifiers_named_in``), the candidates read under the tenant's row-level security
(``candidates.naming_identifiers``), real masking, real embeddings, real search."""

import uuid
from dataclasses import replace

import pytest

from memory_service.retrieval import candidates
from memory_service.retrieval.lexical import identifiers_named_in, query_identifiers
from memory_service.retrieval.search import RANKING, identifiers_named
from tenants.context import tenant_context
from tests.memories.searching import search_scores, write_note

pytestmark = pytest.mark.django_db

# The Japanese note names the event; the English ones hold all of its words, not the event.
NOTES = [
    "payments.charge.captured.v1 のイベントは二重に届くことがある。consumer 側で event_id による重複排除を行う。",
    "The v1 payments API captures a charge once per order.",
    "In the v1 payments flow the charge is captured when the parcel leaves the warehouse.",
]
QUERY = "payments.charge.captured.v1"

QUERY_IDENTIFIERS = [
    ("payments.charge.captured.v1", ["payments.charge.captured.v1"]),
    ("kuromoji_stemmer を入れた理由", ["kuromoji_stemmer"]),
    ("kuromoji_stemmerを入れた理由", ["kuromoji_stemmer"]),
    ("ClusterIssuerの設定ミス", ["clusterissuer"]),
    ("Why does pool_size differ from POOL_SIZE and max.poll.records?", ["pool_size", "max.poll.records"]),
    ("ＥＶＥＮＴ.isComposing", ["event.iscomposing"]),
    ("What did <PERSON_1a2b3c4d5e6f> say about the end-to-end test?", []),
    ("naïveBayes or café_au", []),
    ("e.g. the 2nd retry after 10ms, i.e. 503s", []),
    ("--pool_size and -Xmx512m", ["pool_size", "xmx512m"]),
    (" ".join(f"key_{i}" for i in range(12)), [f"key_{i}" for i in range(8)]),
    ("接続プールの上限は?", []),
]
NAMED = [
    ("Set POOL_SIZE=10 for the workers.", "pool_size"),
    ("pool_sizeを10にする。", "pool_size"),
    ("The pool_size.", "pool_size"),
    ("Title line\nuse (pool_size) here", "pool_size"),
    ("Publishes payments.charge.captured.v1 on capture.", "payments.charge.captured.v1"),
    ("ＰＯＯＬ_ＳＩＺＥ は10", "pool_size"),
    ("run with --pool_size 10", "pool_size"),
]
NOT_NAMED = [
    ("Set max_pool_size=10.", "pool_size"),
    ("pool_size_limit is 10.", "pool_size"),
    ("The pool size is 10.", "pool_size"),
    ("Publishes payments.charge.captured.v10 on capture.", "payments.charge.captured.v1"),
    ("X-Debug-Token-Id is set.", "x-debug-token"),
    ("Dead letters go to payments.charge.captured.v1.dlq.", "payments.charge.captured.v1"),
    ("Publishes captured.v1 on capture.", "v1"),
]


def _write(client, text, title="", **fields):
    return write_note(client, text, **({"title": title} if title else {}), **fields)


def _scores(tenant, query=QUERY, ranking=RANKING) -> dict[str, float]:
    return search_scores(tenant, query, ranking)


@pytest.mark.parametrize(("query", "expected"), QUERY_IDENTIFIERS)
def test_the_query_identifiers_are_lower_cased_once_each_and_never_a_masked_value(query, expected):
    assert query_identifiers(query) == expected


@pytest.mark.parametrize(
    ("text", "identifier", "expected"), [(*n, True) for n in NAMED] + [(*n, False) for n in NOT_NAMED]
)
def test_a_text_names_an_identifier_only_as_a_whole_in_any_case(text, identifier, expected):
    assert identifiers_named_in(text, [identifier]) == int(expected)


def test_a_text_names_each_identifier_it_holds_once():
    assert (
        identifiers_named_in("pool_size, then POOL_SIZE; max.poll.records", ["pool_size", "max.poll.records", "e2e"])
        == 2
    )


def test_the_candidates_naming_the_identifiers_are_read_from_the_database_title_or_text(api_client, tenant):
    texts = [text for text, _ in NAMED + NOT_NAMED]
    ids = [uuid.UUID(_write(api_client, text)) for text in texts]
    titled = uuid.UUID(_write(api_client, "The workers' settings.", title="pool_size and max.poll.records"))
    with tenant_context(tenant.id):
        named = candidates.naming_identifiers([*ids, titled], ["pool_size", "max.poll.records"])
    expected = {ids[i]: 1 for i, (_, identifier) in enumerate(NAMED) if identifier == "pool_size"}
    assert named == expected | {titled: 2}


def test_a_note_naming_the_identifier_gains_the_bonus_and_passes_one_holding_its_words(api_client, tenant, embed_all):
    ids = [_write(api_client, text) for text in NOTES]
    embed_all()
    without = _scores(tenant, ranking=replace(RANKING, identifier=0.0))
    scores = _scores(tenant)
    bonus = RANKING.identifier
    assert bonus == 0.2

    assert set(scores) == set(without) == set(ids)
    for memory_id, score in scores.items():
        assert score == pytest.approx(without[memory_id] + (bonus if memory_id == ids[0] else 0.0))
    # Without it the English note that holds all of the event's words ranks above the note that names it.
    assert without[ids[2]] > without[ids[0]]
    assert scores[ids[0]] > scores[ids[2]]


def test_a_note_naming_one_of_two_identifiers_gains_half(api_client, tenant):
    ids = [uuid.UUID(_write(api_client, text)) for text in ("pool_size is 10.", "pool_size and max.poll.records.")]
    query = "pool_size with max.poll.records"
    with tenant_context(tenant.id):
        lifted = identifiers_named({ids[0]: 0.5, ids[1]: 0.5}, masked=query, bonus=0.2, top=10)
    assert lifted == {ids[0]: pytest.approx(0.6), ids[1]: pytest.approx(0.7)}


def test_the_name_of_the_scope_searched_is_no_identifier_of_the_query():
    scopes = ("u1", "acme/Billing_Core", "")
    assert query_identifiers("How does billing_core retry webhooks v2?", besides=scopes) == ["v2"]
    assert query_identifiers("acme.billing timeouts", besides=("", "acme.billing", "")) == []
    assert query_identifiers("billing_core or pool_size", besides=("", "billing", "")) == ["billing_core", "pool_size"]


def test_naming_the_repository_searched_lifts_none_of_its_notes(api_client, tenant, embed_all):
    texts = ("billing_core deploys run on Fridays.", "Webhook deliveries are retried three times with backoff.")
    in_repository = [_write(api_client, text, scope="repository", repository="billing_core") for text in texts]
    of_user = [_write(api_client, text) for text in texts]  # user "u1"
    embed_all()
    query, unlifted = "How does billing_core retry webhooks?", replace(RANKING, identifier=0.0)

    where = {"repository": "billing_core"}
    scores = search_scores(tenant, query, where=where)
    assert set(scores) == set(in_repository)
    assert scores == pytest.approx(search_scores(tenant, query, unlifted, where=where))
    # Searched in a scope of another name, the note that names it gains the bonus.
    scores, without = search_scores(tenant, query), search_scores(tenant, query, unlifted)
    assert set(scores) == set(of_user)
    assert scores[of_user[0]] == pytest.approx(without[of_user[0]] + RANKING.identifier)
    assert scores[of_user[1]] == pytest.approx(without[of_user[1]])


def test_a_query_without_an_identifier_moves_nothing(api_client, tenant, embed_all):
    for text in NOTES:
        _write(api_client, text)
    embed_all()
    query = "Which payment events can arrive twice?"
    assert _scores(tenant, query) == pytest.approx(_scores(tenant, query, replace(RANKING, identifier=0.0)))


def test_a_candidate_the_bonuses_after_it_could_bring_into_the_results_is_read_too(api_client, tenant):
    ids = [uuid.UUID(_write(api_client, text)) for text in ("Sizes.", "pool_size is 10.")]
    with tenant_context(tenant.id):
        scores = {ids[0]: 1.0, ids[1]: 0.6}
        alone = identifiers_named(scores, masked="pool_size", bonus=0.2, top=1)
        with_later = identifiers_named(scores, masked="pool_size", bonus=0.2, top=1, reach=0.5)
    assert alone[ids[1]] == 0.6  # 0.2 alone cannot reach 1.0: not read
    assert with_later[ids[1]] == pytest.approx(0.8)  # 0.2 and a later 0.3 can


def test_the_search_reads_for_each_bonus_what_it_and_the_bonuses_after_it_could_lift(monkeypatch, api_client, tenant):
    from memory_service.retrieval import search

    seen = {}

    def recording(name, function):
        def record(scores, **kwargs):
            seen[name] = kwargs.get("reach")
            return function(scores, **kwargs)

        return record

    monkeypatch.setattr(search, "identifiers_named", recording("identifier", search.identifiers_named))
    monkeypatch.setattr(search, "periods_named_first", recording("period", search.periods_named_first))
    _write(api_client, "pool_size is 10.")
    _scores(tenant, query="pool_size in March 2026")
    assert seen == {
        "identifier": pytest.approx(RANKING.identifier + RANKING.period + RANKING.when),
        "period": pytest.approx(RANKING.period + RANKING.when),
    }


def test_only_candidates_the_bonus_could_bring_into_the_results_are_read(api_client, tenant):
    ids = [uuid.UUID(_write(api_client, text)) for text in ("pool_size is 10.", "Pools.", "Sizes.")]
    with tenant_context(tenant.id):

        def lifted(first, top, pinned=frozenset()):
            scores = {ids[0]: first, ids[1]: 1.0, ids[2]: 0.9}
            return identifiers_named(scores, masked="pool_size", bonus=0.2, top=top, pinned=pinned)[ids[0]]

        assert lifted(0.71, top=2) == pytest.approx(0.91)
        assert lifted(0.69, top=2) == 0.69  # not read: it stays out of the results either way
        assert lifted(0.1, top=1, pinned={ids[0]}) == pytest.approx(0.3)  # pinned: always read


def test_another_tenant_never_learns_which_memory_names_an_identifier(
    api_client, tenant, other_client, other_tenant, embed_all
):
    ours = [_write(api_client, text) for text in NOTES]
    theirs = _write(other_client, NOTES[0])
    embed_all()
    with tenant_context(other_tenant.id):
        assert candidates.naming_identifiers([uuid.UUID(i) for i in ours], [QUERY]) == {}
    assert set(_scores(other_tenant)) == {theirs}
    assert set(_scores(tenant)) == set(ours)
