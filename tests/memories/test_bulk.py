"""POST /memories/bulk: the outcome of one write per item, with the work of the request batched."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent
from audit.verify import verify_tenant_chain
from memory_service.memories import services
from memory_service.memories.models import ActivityLog, Memory, Supersession
from tenants.context import tenant_context

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories/bulk"


def _bulk(client, items):
    response = client.post(URL, {"items": items}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _note(text, **fields):
    return {"scope": "user", "user": "u1", "text": text} | fields


def test_each_item_gets_the_outcome_a_single_write_would_give(api_client, write, tenant):
    stored = write(text="already stored").json()
    taken = write(text="first body", external_id="ext-taken").json()
    items = [
        _note("new one"),
        _note("bad kind", kind="rumour"),
        _note("already stored"),
        _note("another body", external_id="ext-taken"),
        _note("first body", external_id="ext-taken"),
        _note("new one"),
        _note("twice by id", external_id="ext-new"),
        _note("twice by id, changed", external_id="ext-new"),
        _note("twice by id", external_id="ext-new"),
        _note("in another scope owner", user="u2"),
    ]
    results = _bulk(api_client, items)

    assert [r["status"] for r in results] == [201, 400, 200, 409, 200, 200, 201, 409, 200, 201]
    ids = [r.get("memory", {}).get("id") for r in results]
    assert ids[2] == stored["id"] and ids[4] == taken["id"]
    assert ids[5] == ids[0] and ids[8] == ids[6]
    assert results[3]["error"]["fields"] == {"external_id": ["Already used with a different body."]}
    assert results[1]["error"]["fields"] == {"kind": ["Not a valid choice."]}
    assert results[9]["memory"]["user"] == "u2" and results[0]["memory"]["status"] == "current"
    created_at = [results[i]["memory"]["created_at"] for i in (0, 6, 9)]
    assert created_at == sorted(created_at) and len(set(created_at)) == 3  # input order, as one by one
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 2 + 3
        created = {
            str(i) for i in Memory.objects.exclude(id__in=[stored["id"], taken["id"]]).values_list("id", flat=True)
        }
        assert created == {ids[0], ids[6], ids[9]}
        # One offload event and one activity row per memory created, and the chain still links.
        offloads = AuditEvent.objects.filter(action="offload").order_by("seq")
        assert [e.resource_ids[0] for e in offloads][2:] == [ids[0], ids[6], ids[9]]
        assert ActivityLog.objects.filter(operation="write").count() == 5
    assert verify_tenant_chain(tenant.id).ok


def _long(text):
    """``text`` padded to 200 characters: 60 such items are a request masked and stored in parts."""
    return f"{text} " + "then the staging rollout resumed after the checks passed; " * 4


def test_an_item_repeating_one_of_an_earlier_part_gets_the_outcome_a_single_write_would_give(api_client, tenant):
    from memory_service.pii.helper import part_ranges

    items = [_note(_long(f"plain note {i}")) for i in range(60)]
    items[5] = items[50] = _note(_long("said twice"))
    items[10] = items[55] = _note(_long("same body"), external_id="ext-a")
    items[56] = _note(_long("another body"), external_id="ext-a")
    ranges = part_ranges([len(item["text"]) for item in items])
    part = {index: number for number, indexes in enumerate(ranges) for index in indexes}
    assert len(ranges) > 2 and part[5] == part[10] == 0 and part[50] > 0 and part[55] > 0

    results = _bulk(api_client, items)

    statuses = [r["status"] for r in results]
    assert statuses[50] == statuses[55] == 200 and statuses[56] == 409
    assert statuses.count(201) == 57
    assert results[50]["memory"]["id"] == results[5]["memory"]["id"]
    assert results[55]["memory"]["id"] == results[10]["memory"]["id"]
    assert results[56]["error"]["fields"] == {"external_id": ["Already used with a different body."]}
    created_at = [r["memory"]["created_at"] for r in results if r["status"] == 201]
    assert created_at == sorted(created_at)  # input order across the parts
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 57
        assert ActivityLog.objects.filter(operation="write").count() == 57
    assert verify_tenant_chain(tenant.id).ok


def test_a_character_that_cannot_be_stored_in_a_later_part_refuses_that_item_alone(api_client, tenant):
    from memory_service.pii.helper import part_ranges

    items = [_note(_long(f"Priya Raman reviewed change {i}")) for i in range(60)]
    items[50] = _note(_long("Kenji Watanabe pasted \x00 a NUL"))
    assert len(part_ranges([len(item["text"]) for item in items])) > 1

    results = _bulk(api_client, items)

    assert [r["status"] for r in results] == [201] * 50 + [400] + [201] * 9
    assert "text" in results[50]["error"]["fields"]
    stored = [r["memory"]["text"] for r in results if r["status"] == 201]
    assert not any("Priya" in text or "Raman" in text for text in stored)  # the other parts masked as ever


def test_a_superseding_item_is_written_in_its_place(api_client, tenant):
    old = _bulk(api_client, [_note("use npm", kind="decision", scope="repository", repository="r1")])[0]["memory"]
    items = [
        _note("before the decision"),
        {
            "scope": "repository",
            "repository": "r1",
            "kind": "decision",
            "text": "use pnpm",
            "supersedes": [{"id": old["id"]}],
        },  # fmt: skip
        _note("after the decision"),
        _note("before the decision"),
        {
            "scope": "repository",
            "repository": "r1",
            "kind": "decision",
            "text": "use yarn",
            "supersedes": [{"id": "00000000-0000-0000-0000-000000000000"}],
        },  # fmt: skip
    ]
    results = _bulk(api_client, items)

    assert [r["status"] for r in results] == [201, 201, 201, 200, 404]
    assert results[3]["memory"]["id"] == results[0]["memory"]["id"]
    with tenant_context(tenant.id):
        link = Supersession.objects.get()
        assert (str(link.old_id), str(link.new_id)) == (old["id"], results[1]["memory"]["id"])
        assert not Memory.objects.filter(text="use yarn").exists()  # its failed link undid it
    assert api_client.get(f"/api/v1/memories/{old['id']}").json()["status"] == "superseded"


def test_a_request_of_many_items_makes_a_fixed_number_of_queries(api_client, tenant):
    def queries(count: int, prefix: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            results = _bulk(api_client, [_note(f"{prefix} note {i}") for i in range(count)])
        assert {r["status"] for r in results} == {201}
        return len(captured)

    queries(1, "first")  # the token's first use of the minute is recorded once
    assert queries(200, "many") == queries(5, "few") <= 15


def test_a_request_stored_in_parts_makes_a_fixed_number_of_queries(api_client, tenant):
    def queries(count: int, prefix: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            results = _bulk(api_client, [_note(_long(f"{prefix} note {i}")) for i in range(count)])
        assert {r["status"] for r in results} == {201}
        return len(captured)

    queries(1, "first")
    assert queries(150, "many") == queries(60, "few") <= 60  # four parts, whatever their size


def test_a_bulk_write_queues_its_embeddings_in_tasks_of_a_hundred(
    api_client, tenant, monkeypatch, django_capture_on_commit_callbacks
):
    from memory_service.memories import tasks

    published = []
    original = tasks.enqueue_embedding

    def recording(*, tenant_id, memory_ids):
        published.append(list(memory_ids))
        return original(tenant_id=tenant_id, memory_ids=memory_ids)

    monkeypatch.setattr(tasks, "enqueue_embedding", recording)
    with django_capture_on_commit_callbacks(execute=True):
        results = _bulk(api_client, [_note(f"embed me {i}") for i in range(250)])
    assert [len(chunk) for chunk in published] == [100, 100, 50]
    assert [i for chunk in published for i in chunk] == [r["memory"]["id"] for r in results]


def test_a_batch_that_loses_a_race_is_written_again_item_by_item(api_client, write, tenant, monkeypatch):
    """A concurrent request stores the same text between this batch's lookup and its insert: the
    unique key refuses the insert, and each item is written again on its own."""
    winner = write(text="raced").json()
    monkeypatch.setattr(services._Stored, "for_writes", classmethod(lambda cls, principal, writes: cls({}, {})))

    results = _bulk(api_client, [_note("fresh"), _note("raced")])

    assert [r["status"] for r in results] == [201, 200]
    assert results[1]["memory"]["id"] == winner["id"]
    with tenant_context(tenant.id):
        assert Memory.objects.filter(text="fresh").count() == 1
    assert verify_tenant_chain(tenant.id).ok


def test_another_tenants_items_never_meet_ours(api_client, other_client, tenant, other_tenant):
    mine = _bulk(api_client, [_note("same words", external_id="same-id")])[0]["memory"]
    theirs = _bulk(other_client, [_note("same words", external_id="same-id"), _note("same words")])
    assert [r["status"] for r in theirs] == [201, 200]
    assert theirs[0]["memory"]["id"] != mine["id"] and theirs[1]["memory"]["id"] == theirs[0]["memory"]["id"]
    with tenant_context(other_tenant.id):
        assert Memory.objects.count() == 1


def test_a_request_whose_every_item_is_refused_stores_nothing(api_client, tenant):
    results = _bulk(api_client, [_note("x", kind="rumour"), {"scope": "user", "user": "u1"}, "not an object"])
    assert [r["status"] for r in results] == [400, 400, 400]
    assert results[1]["error"]["fields"] == {"text": ["This field is required."]}
    with tenant_context(tenant.id):
        assert not Memory.objects.exists() and not AuditEvent.objects.filter(action="offload").exists()


def test_write_rows_in_the_activity_log_carry_kind_priority_and_the_time_taken(api_client, tenant):
    single = api_client.post(
        "/api/v1/memories",
        {"scope": "repository", "repository": "r1", "kind": "lesson", "priority": "high", "text": "Pin the base image"},
        format="json",
    )
    assert single.status_code == 201, single.content
    _bulk(api_client, [_note("first of two", kind="preference"), _note("second of two", kind="decision")])
    rows = api_client.get("/api/v1/activity", {"operation": "write"}).json()["results"]
    by_memory = {row["memory_ids"][0]: row for row in rows}
    first = by_memory[single.json()["id"]]
    assert first["filters"] == {"kind": "lesson", "priority": "high", "scope": "repository"}
    assert first["latency_ms"] > 0
    bulk_rows = [row for row in rows if row["memory_ids"][0] != single.json()["id"]]
    assert sorted(row["filters"]["kind"] for row in bulk_rows) == ["decision", "preference"]
    assert all(row["filters"]["priority"] == "normal" and row["latency_ms"] > 0 for row in bulk_rows)


def test_a_large_request_is_masked_over_two_processes_as_in_one(api_client, tenant, settings, monkeypatch):
    from memory_service.pii import get_masker
    from memory_service.pii.helper import PART_SHARES, shared_helper
    from tests.pii.test_helper import wait_until_ready

    settings.PII_HELPER_PROCESS = True
    monkeypatch.setattr("memory_service.pii.helper.spare_core", lambda: True)  # whatever else runs now
    helper = shared_helper()
    wait_until_ready(helper, get_masker().version)
    answered = helper.answered
    names = ["Priya Raman", "Kenji Watanabe", "Maria Gonzalez", "Olga Petrova"]
    texts = [
        f"{names[i % 4]} moved the cut-over of service {i} to Friday; mail ops{i}@example.com." for i in range(120)
    ]

    results = _bulk(api_client, [_note(text) for text in texts])

    assert helper.answered == answered + len(PART_SHARES) - 1  # every part after the first
    stored = [r["memory"]["text"] for r in results]
    first = r"<PERSON_\w{12}> moved the cut-over of service 0 to Friday; mail <EMAIL_ADDRESS_\w{12}>\."
    assert re.fullmatch(first, stored[0])
    assert not any(name.split()[1] in text for text in stored for name in names)
    settings.PII_HELPER_PROCESS = False
    again = _bulk(api_client, [_note(text, user="u2") for text in texts])
    assert [r["memory"]["text"] for r in again] == stored
    assert helper.answered == answered + len(PART_SHARES) - 1
