"""A conversation written in bulk requests: each turn linked to the one before it
(``services.continues_thread``; across requests, ``services.thread_end``), the link gone with
the turn it names, and search lending a turn a share of its neighbours' scores
(``retrieval.search.add_thread_neighbours``) and, in a ranking that asks for it, reading the turns
next to its candidates (``retrieval.candidates.thread_neighbours``)."""

import pytest
from django.db import connection

from memory_service.erasure.services import user_erase
from memory_service.memories.models import Memory
from memory_service.retrieval.search import RANKING, Ranking, memory_search
from tenants.access import Principal
from tenants.context import tenant_context

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

URL = "/api/v1/memories/bulk"


def _bulk(client, items):
    response = client.post(URL, {"items": items}, format="json")
    assert response.status_code == 200, response.content
    return [r.get("memory", {}).get("id") for r in response.json()["results"]]


def _turn(text, minute, **fields):
    return {"scope": "user", "user": "u1", "kind": "note", "text": text,
            "occurred_at": f"2026-05-08T13:{minute:02d}:00Z"} | fields  # fmt: skip


def _links(tenant, ids):
    """id → the id of the turn it follows (None: none), for ``ids`` that exist."""
    with tenant_context(tenant.id):
        found = dict(Memory.objects.filter(id__in=[i for i in ids if i]).values_list("id", "thread_previous_id"))
    return {str(k): (str(v) if v else None) for k, v in found.items()}


def test_consecutive_notes_of_one_owner_with_close_times_are_linked_in_order(api_client, tenant):
    ids = _bulk(api_client, [_turn("Caroline: did you finish the class?", 0), _turn("Melanie: yes, in March", 1),
                             _turn("Caroline: and the bowl?", 1), _turn("Melanie: it is blue", 59)])  # fmt: skip
    assert _links(tenant, ids) == {ids[0]: None, ids[1]: ids[0], ids[2]: ids[1], ids[3]: ids[2]}


def test_what_is_not_the_next_turn_of_a_conversation_is_not_linked(api_client, tenant):
    items = [
        _turn("first turn", 0),
        _turn("another owner", 1, user="u2"),
        _turn("back to u1 after u2's note", 2),
        _turn("a lesson, not a note", 3, kind="lesson"),
        _turn("after the lesson", 4),
        {"scope": "user", "user": "u1", "kind": "note", "text": "no time given"},
        _turn("after the note without a time", 5),
        _turn("said earlier than the turn before", 1),
        _turn("two hours later", 0) | {"occurred_at": "2026-05-08T15:02:00Z"},
        _turn("and the next turn", 0) | {"occurred_at": "2026-05-08T15:03:00Z"},
    ]
    ids = _bulk(api_client, items)
    links = _links(tenant, ids)
    assert [links[i] for i in ids] == [None] * 9 + [ids[8]]


def test_a_refused_item_is_skipped_and_one_repeating_a_stored_memory_breaks_the_thread(api_client, tenant):
    stored = _bulk(api_client, [_turn("said before", 0) | {"occurred_at": "2026-01-01T00:00:00Z"}])[0]
    ids = _bulk(api_client, [_turn("one", 0), _turn("two", 1) | {"kind": "rumour"}, _turn("three", 2),
                             _turn("said before", 3), _turn("four", 4)])  # fmt: skip
    assert ids[1] is None and ids[3] == stored
    assert _links(tenant, ids) == {ids[0]: None, ids[2]: ids[0], stored: None, ids[4]: None}


def test_a_thread_continues_across_the_parts_a_large_request_is_stored_in(api_client, tenant):
    from memory_service.pii.helper import part_ranges

    padding = " then the staging rollout resumed after the checks passed;" * 4
    items = [_turn(f"turn {i}{padding}", i % 60) for i in range(60)]
    assert len(part_ranges([len(i["text"]) for i in items])) > 1
    ids = _bulk(api_client, items)
    links = _links(tenant, ids)
    assert [links[i] for i in ids] == [None] + ids[:-1]


def test_turns_written_on_their_own_are_linked_too(api_client, tenant, monkeypatch):
    from memory_service.memories import services

    stored = _bulk(api_client, [_turn("an older note", 0) | {"occurred_at": "2026-01-01T00:00:00Z"}])[0]
    # An item that supersedes is written alone, in its place.
    ids = _bulk(api_client, [_turn("one", 0), _turn("two", 1) | {"supersedes": [{"id": stored}]}, _turn("three", 2)])
    assert _links(tenant, ids) == {ids[0]: None, ids[1]: ids[0], ids[2]: ids[1]}
    # A batch that loses a race is written again item by item, in order.
    monkeypatch.setattr(services._Stored, "for_writes", classmethod(lambda cls, principal, writes: cls({}, {})))
    again = _bulk(api_client, [_turn("four", 3), _turn("five", 4), _turn("one", 5), _turn("six", 6)])
    assert again[2] == ids[0]  # the repeat, found after the unique key refused the batch
    assert _links(tenant, again) == {again[0]: ids[2], again[1]: again[0], ids[0]: None, again[3]: None}


def test_a_conversation_sent_in_several_requests_stays_one_thread(api_client, tenant):
    first = _bulk(api_client, [_turn("one", 0), _turn("two", 1)])
    second = _bulk(api_client, [_turn("three", 2), _turn("four", 3)])
    assert _links(tenant, first + second) == {first[0]: None, first[1]: first[0], second[0]: first[1],
                                              second[1]: second[0]}  # fmt: skip
    # The first turn continues the note written last among those said in the hour up to it.
    later = _bulk(api_client, [_turn("five", 30), _turn("six", 31)])
    assert _links(tenant, later)[later[0]] == second[1]
    ten_past = _bulk(api_client, [_turn("said at ten past", 10)])[0]  # "five" and "six" were said after it
    assert _links(tenant, [ten_past])[ten_past] == second[1]
    twenty_past = _bulk(api_client, [_turn("said at twenty past", 20)])[0]
    assert _links(tenant, [twenty_past])[twenty_past] == ten_past


def test_a_session_whose_turns_all_carry_its_date_stays_one_thread_in_the_order_sent(api_client, tenant):
    """An importer that gives every turn of a session the session's time, in requests of any size."""
    first = _bulk(api_client, [_turn("one", 0), _turn("two", 0), _turn("three", 0)])
    second = _bulk(api_client, [_turn("four", 0), _turn("five", 0)])
    third = _bulk(api_client, [_turn("six", 0)])
    ids = first + second + third
    assert _links(tenant, ids) == {ids[0]: None, **{ids[i]: ids[i - 1] for i in range(1, 6)}}


def test_a_conversation_written_turn_by_turn_is_one_thread_and_a_repeat_moves_nothing(api_client, tenant):
    def single(item):
        response = api_client.post("/api/v1/memories", item, format="json")
        assert response.status_code in (200, 201), response.content
        return response.json()["id"]

    ids = [single(_turn("one", 0)), single(_turn("two", 1)), single(_turn("three", 1))]
    assert _links(tenant, ids) == {ids[0]: None, ids[1]: ids[0], ids[2]: ids[1]}
    assert single(_turn("two", 1)) == ids[1]  # a repeat: nothing linked anew
    lesson = single(_turn("a lesson", 2, kind="lesson"))
    untimed = single({"scope": "user", "user": "u1", "kind": "note", "text": "no time given"})
    after = _bulk(api_client, [_turn("four", 3)])[0]
    assert _links(tenant, [*ids, lesson, untimed, after]) == {ids[0]: None, ids[1]: ids[0], ids[2]: ids[1],
                                                              lesson: None, untimed: None, after: ids[2]}  # fmt: skip


def test_a_request_does_not_continue_what_is_not_its_conversation(api_client, tenant):
    stored = _bulk(api_client, [_turn("said at one o'clock", 0)])[0]
    starts = [
        _turn("two hours later", 0) | {"occurred_at": "2026-05-08T15:00:01Z"},
        _turn("said before it", 0) | {"occurred_at": "2026-05-08T12:59:00Z"},
        _turn("another owner", 1, user="u2"),
        _turn("another scope", 1, scope="session", session="s1"),
        _turn("a lesson", 1, kind="lesson"),
        {"scope": "user", "user": "u1", "kind": "note", "text": "no time given"},
    ]
    for item in starts:
        first = _bulk(api_client, [item])[0]
        assert _links(tenant, [first]) == {first: None}, item["text"]
        with tenant_context(tenant.id):
            Memory.objects.filter(id=first).delete()  # the next start sees the stored note as newest again
    # A repeat of the stored note is no new turn: nothing is linked to anything.
    assert _bulk(api_client, [_turn("said at one o'clock", 1)]) == [stored]
    assert _links(tenant, [stored]) == {stored: None}


def test_a_note_never_continues_another_clients_note_in_a_shared_scope(api_client, tenant):
    from tests.conftest import client_for
    from tests.factories import make_token

    repository = {"scope": "repository", "repository": "r1"}
    ours = _bulk(api_client, [_turn("our deploy note", 0) | repository])[0]
    other = client_for(make_token(tenant, name="other-agent", permissions=["memory:write", "memory:read"]).raw)
    theirs = _bulk(other, [_turn("their note, said just after", 1) | repository])[0]
    mine_again = _bulk(api_client, [_turn("our next note", 2) | repository])[0]
    assert _links(tenant, [ours, theirs, mine_again]) == {ours: None, theirs: None, mine_again: ours}


def test_a_request_never_continues_another_tenants_conversation(api_client, other_client, tenant, other_tenant):
    theirs = _bulk(other_client, [_turn("their turn", 0)])[0]
    ours = _bulk(api_client, [_turn("our turn", 1)])[0]
    assert _links(tenant, [ours]) == {ours: None}
    assert _links(other_tenant, [theirs]) == {theirs: None}


def test_repeating_a_request_keeps_its_links(api_client, tenant):
    items = [_turn("the first turn", 0), _turn("the second turn", 1)]
    ids = _bulk(api_client, items)
    assert _bulk(api_client, items) == ids
    assert _links(tenant, ids) == {ids[0]: None, ids[1]: ids[0]}


def test_deleting_a_turn_or_erasing_its_user_removes_every_link_to_it(api_client, tenant):
    ids = _bulk(api_client, [_turn("one", 0), _turn("two", 1), _turn("three", 2)])
    assert api_client.delete(f"/api/v1/memories/{ids[1]}").status_code == 204
    assert _links(tenant, ids) == {ids[0]: None, ids[2]: None}
    # A path that does not go through the ORM's collector: the database clears the link itself.
    more = _bulk(api_client, [_turn("four", 3), _turn("five", 4)])
    with tenant_context(tenant.id), connection.cursor() as cursor:
        cursor.execute("DELETE FROM memories_memory WHERE id = %s", [more[0]])
    assert _links(tenant, more) == {more[1]: None}
    user_erase(principal=Principal.operator(tenant=tenant, actor="admin:t"), user="u1")
    assert _links(tenant, ids + more) == {}


def test_another_tenants_conversation_is_threaded_apart(api_client, other_client, tenant, other_tenant):
    items = [_turn("the first turn", 0), _turn("the second turn", 1)]
    ours, theirs = _bulk(api_client, items), _bulk(other_client, items)
    assert _links(tenant, ours) == {ours[0]: None, ours[1]: ours[0]}
    assert _links(other_tenant, theirs) == {theirs[0]: None, theirs[1]: theirs[0]}
    assert _links(tenant, theirs) == {} and _links(other_tenant, ours) == {}


def test_a_turn_gets_half_of_its_neighbours_scores_when_they_are_candidates(api_client, tenant, embed_all):
    question = "Caroline: did you ever finish that pottery class you told me about?"
    answer = "Melanie: yes! I made a blue bowl for my mother in March"
    ids = _bulk(api_client, [_turn(question, 0), _turn(answer, 1)])
    alone = _bulk(api_client, [_turn("Melanie: yes! I made a blue bowl for my mother in April", 0, user="u1")
                               | {"occurred_at": "2026-05-20T09:00:00Z"}])[0]  # fmt: skip
    embed_all()
    principal = Principal.operator(tenant=tenant, actor="t")

    def scores(ranking):
        with tenant_context(tenant.id):
            hits = memory_search(principal=principal, query="the pottery bowl", user="u1", top=50, ranking=ranking).hits
        return {str(h.memory.id): h.score for h in hits}

    own, lent = scores(Ranking(thread=0.0)), scores(RANKING)
    assert RANKING.thread == 0.5 and set(own) == set(lent) == {*ids, alone}
    assert lent[ids[1]] == pytest.approx(own[ids[1]] + 0.5 * own[ids[0]])
    assert lent[ids[0]] == pytest.approx(own[ids[0]] + 0.5 * own[ids[1]])
    assert lent[alone] == own[alone]
    assert lent[ids[1]] > lent[alone]  # the answer to the question about pottery, not its twin


FETCH = Ranking(thread_fetch=True)  # not the service's ranking: measured, no gain on the training half


def _search(tenant, query, ranking=FETCH, **fields):
    """id → score of a search in u1's scope."""
    with tenant_context(tenant.id):
        hits = memory_search(principal=Principal.operator(tenant=tenant, actor="t"), query=query, user="u1",
                             ranking=ranking, **fields).hits  # fmt: skip
    return {str(hit.memory.id): hit.score for hit in hits}


def test_the_turns_next_to_a_match_can_be_read_and_ranked_on_half_its_score(api_client, tenant):
    # Not embedded: only the full-text stage finds anything, and only the turn naming the pottery.
    ids = _bulk(api_client, [_turn("Caroline: we talked about cats", 0), _turn("Caroline: how was the pottery?", 1),
                             _turn("Melanie: I made a blue one for my mother", 2),
                             _turn("Caroline: and the garden?", 3)])  # fmt: skip
    found = _search(tenant, "pottery")
    assert set(found) == {ids[0], ids[1], ids[2]}
    assert found[ids[0]] == found[ids[2]] == pytest.approx(0.5 * found[ids[1]])
    assert set(_search(tenant, "pottery", ranking=RANKING)) == {ids[1]}  # the service's: none read


def test_a_neighbour_outside_the_scopes_filter_is_not_read(api_client, tenant):
    ids = _bulk(api_client, [_turn("Caroline: how was the pottery?", 1), _turn("Melanie: a blue one", 2)])
    assert set(_search(tenant, "pottery")) == {ids[0], ids[1]}
    with tenant_context(tenant.id):
        Memory.objects.filter(id=ids[1]).update(kind="lesson")  # of a kind the search does not ask for
    assert set(_search(tenant, "pottery", kinds=["note"])) == {ids[0]}
    with tenant_context(tenant.id):
        Memory.objects.filter(id=ids[1]).update(kind="note", expires_at="2026-01-01T00:00:00Z")
    assert set(_search(tenant, "pottery")) == {ids[0]}


def test_a_link_forged_to_another_tenants_turn_brings_nothing_of_theirs(api_client, other_client, tenant,
                                                                        other_tenant):  # fmt: skip
    ours = _bulk(api_client, [_turn("Caroline: how was the pottery?", 1)])[0]
    theirs = _bulk(other_client, [_turn("Melanie: their secret answer", 2), _turn("Melanie: their pottery", 3)])
    # Links the service would never write, across tenants in both directions.
    with tenant_context(tenant.id):
        Memory.objects.filter(id=ours).update(thread_previous_id=theirs[0])
    with tenant_context(other_tenant.id):
        Memory.objects.filter(id=theirs[1]).update(thread_previous_id=ours)
    assert set(_search(tenant, "pottery")) == {ours}
    assert set(_search(other_tenant, "pottery")) == {theirs[1]}
