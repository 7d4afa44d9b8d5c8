"""A conversation written in one bulk request: each turn linked to the one before it
(``services.continues_thread``), the link gone with the turn it names, and search lending a turn
a share of its neighbours' scores (``retrieval.search.add_thread_neighbours``)."""

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
    assert _links(tenant, again) == {again[0]: None, again[1]: again[0], ids[0]: None, again[3]: None}


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
