"""The ordering rules of ``retrieval.search`` on plain objects (the searches are in tests/memories)."""

import uuid
from types import SimpleNamespace

import pytest

from memory_service.memories.status import DerivedStatus, Replacement
from memory_service.retrieval.search import (
    Ranking,
    add_thread_neighbours,
    fuse,
    lexical_gate_open,
    lexical_one_sided,
    replacements_first,
)


def hit(name: str, replaced_by: tuple = (), partial: bool = False):
    status = DerivedStatus("superseded", [Replacement(id=r, title=None, partial=partial) for r in replaced_by])
    return SimpleNamespace(memory=SimpleNamespace(id=name), status=status if replaced_by else None)


def names(hits) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_replacement_moves_up_to_just_before_what_it_replaces():
    hits = [hit("x"), hit("old", ("new",)), hit("y"), hit("new"), hit("z")]
    assert names(replacements_first(hits)) == ["x", "new", "old", "y", "z"]


def test_a_chain_ends_newest_first_and_an_absent_replacement_moves_nothing():
    hits = [hit("a", ("b",)), hit("c", ("gone",)), hit("b", ("d",)), hit("d")]
    assert names(replacements_first(hits)) == ["d", "b", "a", "c"]


def test_a_replacement_already_above_stays_where_it_is():
    hits = [hit("new"), hit("x"), hit("old", ("new",), partial=True)]
    assert names(replacements_first(hits)) == ["new", "x", "old"]


def test_fusion_normalises_each_stage_and_a_stage_alone_counts_whole():
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    dense = {a: 0.9, b: 0.5}
    lexical = {b: 8.0, c: 2.0}
    fused = fuse(dense=dense, lexical=lexical, use_lexical=True, ranking=Ranking(dense=0.6, lexical=0.4))
    assert fused[a] == 0.6 and fused[b] == 0.4 and abs(fused[c] - 0.1) < 1e-12
    assert fuse(dense={}, lexical=lexical, use_lexical=False) == {b: 1.0, c: 0.25}
    assert fuse(dense=dense, lexical=lexical, use_lexical=False, ranking=Ranking(dense=0.7)) == {a: 0.7, b: 0.0}


def test_per_script_normalisation_puts_each_languages_best_on_top():
    en, ja, en2 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    dense = {en: 0.90, en2: 0.80, ja: 0.86}
    scripts = {en: "latin", en2: "latin", ja: "cjk"}
    ranking = Ranking(dense=1.0, lexical=0.0, dense_per_script=True)
    assert fuse(dense=dense, lexical={}, use_lexical=False, ranking=ranking, scripts=scripts) == {
        en: 1.0, en2: 0.0, ja: 1.0
    }  # fmt: skip


def test_by_the_ideal_score_a_weak_best_match_stays_weak():
    strong, weak = uuid.uuid4(), uuid.uuid4()
    ranking = Ranking(dense=0.5, lexical=0.5, lexical_norm="ideal")
    fused = fuse(dense={strong: 0.4}, lexical={strong: 9.0, weak: 3.0}, use_lexical=True, ranking=ranking, ideal=6.0)
    assert fused == {strong: 0.5 + 0.5, weak: 0.5 * 0.5}  # capped at 1


def test_the_service_divides_bm25_by_the_ideal_score_but_alone_by_the_best():
    strong, stronger, weak = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    lexical = {strong: 7.0, stronger: 9.0, weak: 1.5}
    fused = fuse(dense={strong: 0.4, weak: 0.2}, lexical=lexical, use_lexical=True, ideal=6.0)
    assert fused == {strong: 0.5 + 0.5, stronger: 0.5, weak: 0.5 * 0.25}
    # No dense stage (the embedder unavailable): BM25 is the order, no tie at the cap.
    alone = fuse(dense={}, lexical=lexical, use_lexical=True, ideal=6.0)
    assert alone == {strong: 7.0 / 9.0, stronger: 1.0, weak: 1.5 / 9.0}


def _gate_case(best_script: str, others: int = 9):
    """Dense candidates: the best in ``best_script``, then ``others`` English notes; and their scripts."""
    best = uuid.uuid4()
    english = [uuid.uuid4() for _ in range(others)]
    dense = {best: 0.9} | {memory_id: 0.8 - 0.01 * n for n, memory_id in enumerate(english)}
    scripts = {best: best_script} | {memory_id: "latin" for memory_id in english}
    return best, english, dense, scripts


def test_lexical_votes_are_one_sided_when_the_models_best_match_is_across_languages_and_nothing_there_matched():
    best, english, dense, scripts = _gate_case("cjk")
    query = "How do we rotate the signing keys?"
    assert lexical_one_sided(dense=dense, lexical={english[0]: 7.0, english[3]: 2.0}, scripts=scripts, query=query)
    # A note of the other language that shares a word (an identifier) with the query: both sides can be voted for.
    japanese = uuid.uuid4()
    scripts[japanese] = "cjk"
    assert not lexical_one_sided(dense=dense, lexical={english[0]: 7.0, japanese: 3.0}, scripts=scripts, query=query)


def test_lexical_votes_are_not_one_sided_on_the_querys_side_for_one_term_or_without_dense_candidates():
    # The model's best match shares the query's language, even if the full-text stage found only the other's.
    _, _, dense, scripts = _gate_case("latin")
    japanese = uuid.uuid4()
    scripts[japanese] = "cjk"
    assert not lexical_one_sided(dense=dense, lexical={japanese: 5.0}, scripts=scripts, query="rotate signing keys")
    _, english, dense, scripts = _gate_case("cjk")
    assert not lexical_one_sided(dense=dense, lexical={english[1]: 5.0}, scripts=scripts, query="reducedMotion")
    assert not lexical_one_sided(dense={}, lexical={english[1]: 5.0}, scripts=scripts, query="rotate signing keys")


def test_one_sided_lexical_votes_keep_a_share_of_their_weight_and_full_text_matches_still_rank():
    best, english, dense, scripts = _gate_case("cjk", others=2)
    found_by_text_alone = uuid.uuid4()
    lexical = {english[0]: 10.0, found_by_text_alone: 10.0}
    ranking = Ranking(dense=0.5, lexical=0.5, one_sided=0.1)
    full = fuse(dense=dense, lexical=lexical, use_lexical=True, ranking=ranking, ideal=10.0)
    one_sided = fuse(dense=dense, lexical=lexical, use_lexical=True, ranking=ranking, ideal=10.0, one_sided=True)

    assert max(full, key=full.get) == english[0]  # full votes bury the model's best match
    assert max(one_sided, key=one_sided.get) == best
    assert one_sided[best] == pytest.approx(0.95)  # the dense weight gets what the lexical one gave up
    assert one_sided[found_by_text_alone] == pytest.approx(0.05)  # still listed, low


def test_lexical_votes_stop_when_most_of_the_dense_top_ten_are_in_another_language():
    _, _, dense, scripts = _gate_case("latin", others=9)
    for memory_id in list(dense)[1:7]:
        scripts[memory_id] = "cjk"
    assert not lexical_gate_open(dense=dense, scripts=scripts, query="rotate signing keys")
    assert lexical_gate_open(dense=dense, scripts={i: "latin" for i in dense}, query="rotate signing keys")


def test_an_identifier_keeps_the_lexical_gate_open_unless_it_names_the_scope_searched():
    _, _, dense, scripts = _gate_case("latin", others=9)
    for memory_id in list(dense)[1:7]:
        scripts[memory_id] = "cjk"
    query = "rotate the signing keys of key_service"
    assert lexical_gate_open(dense=dense, scripts=scripts, query=query)
    assert lexical_gate_open(dense=dense, scripts=scripts, query=query, scope_names=("u1", "", ""))
    assert not lexical_gate_open(dense=dense, scripts=scripts, query=query, scope_names=("", "key_service", ""))


def test_memories_that_supersede_each_other_end_in_some_order():
    hits = [hit("a", ("b",)), hit("x"), hit("b", ("a",))]
    assert sorted(names(replacements_first(hits))) == ["a", "b", "x"]


def test_a_replacement_through_an_unlisted_memory_moves_up_too():
    hits = [hit("a", ("b",)), hit("x"), hit("c")]  # a replaced by b (not listed), b by c
    assert names(replacements_first(hits)) == ["a", "x", "c"]
    assert names(replacements_first(hits, {"a": {"b", "c"}})) == ["c", "a", "x"]


def test_a_turn_borrows_only_from_neighbours_that_are_candidates():
    first, second, third, gone = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    facts = {
        first: SimpleNamespace(follows=None),
        second: SimpleNamespace(follows=first),
        third: SimpleNamespace(follows=second),
        gone: SimpleNamespace(follows=third),  # a recent-stage candidate: no fused score
    }
    scores = {first: 0.8, second: 0.2, third: 0.4}
    assert add_thread_neighbours(scores, facts, 0.5) == pytest.approx(
        {first: 0.8 + 0.1, second: 0.2 + 0.4 + 0.2, third: 0.4 + 0.1}
    )
    lone = uuid.uuid4()
    assert add_thread_neighbours({lone: 0.3}, {lone: SimpleNamespace(follows=first)}, 0.5) == {lone: 0.3}
    assert add_thread_neighbours(scores, facts, 0.0) == scores


def test_a_fetched_turn_ranks_on_its_candidate_neighbours_shares_and_lends_nothing():
    before, middle, after, far = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    facts = {
        before: SimpleNamespace(follows=None),  # fetched: the turn before the candidate
        middle: SimpleNamespace(follows=before),  # the only candidate
        after: SimpleNamespace(follows=middle),  # fetched: the turn after it
        far: SimpleNamespace(follows=after),  # fetched, but next to no candidate
    }
    fetched = {before, after, far}
    assert add_thread_neighbours({middle: 0.6}, facts, 0.5, fetched=fetched) == pytest.approx(
        {middle: 0.6, before: 0.3, after: 0.3}
    )
    assert add_thread_neighbours({middle: 0.6}, facts, 0.0, fetched=fetched) == {middle: 0.6}
