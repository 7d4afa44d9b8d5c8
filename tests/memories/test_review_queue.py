"""The admin's review queue: what needs a person first, bulk writes and session notes on request,
counts per category, plain wording; another tenant's memories never appear."""

import re

import pytest
from django.test import Client

from memory_service.memories.models import Confidence, Memory, Origin
from tenants.context import tenant_context
from tenants.models import User

pytestmark = pytest.mark.django_db

URL = "/admin/memories/reviewqueuememory/"


def _admin_of(tenant) -> Client:
    client = Client()
    client.force_login(User.objects.create_user(f"admin-{tenant.slug}", password="x", is_staff=True, tenant=tenant))
    return client


def _write(client, **fields) -> str:
    body = {"scope": "repository", "repository": "web", "kind": "note"} | fields
    response = client.post("/api/v1/memories", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _bulk(client, *texts) -> list[str]:
    items = [{"scope": "user", "user": "u1", "kind": "preference", "text": text} for text in texts]
    response = client.post("/api/v1/memories/bulk", {"items": items}, format="json")
    assert response.status_code == 200, response.content
    return [result["memory"]["id"] for result in response.json()["results"]]


def _session_note(client, name, text) -> str:
    response = client.put(f"/api/v1/sessions/s1/notes/{name}", {"text": text, "user": "u1"}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()["id"]


def _listed(page: str) -> list[str]:
    """The ids of the memories listed, in page order."""
    return re.findall(r"/reviewqueuememory/([0-9a-f-]{36})/change/", page)


@pytest.fixture
def queue(api_client, other_client):
    """One memory of each category, written in this order (so newest last)."""
    ids = {
        "note": _write(api_client, text="The staging database is shared with QA"),
        "pinning": _write(api_client, text="Always run migrations before deploying", priority="high"),
        "lesson": _write(api_client, text="Flaky tests came from a shared temp dir", kind="lesson"),
        "high_preference": _write(
            api_client, scope="user", user="u1", text="Answer in French", priority="high", kind="preference"
        ),  # fmt: skip
        "decision": _write(api_client, text="We use pnpm, not npm", kind="decision"),
        "conclusion": _write(api_client, text="The cache was never the bottleneck", kind="conclusion"),
        "validated": _write(api_client, text="Already reviewed lesson", kind="lesson"),
        "session_note": _session_note(api_client, "plan", "1. fix the login page"),
    }
    ids["bulk_tabs"], ids["bulk_dark_mode"] = _bulk(api_client, "Prefers tabs", "Prefers dark mode")
    api_client.post(f"/api/v1/memories/{ids['validated']}/promote")
    ids["charlie"] = _write(other_client, text="charlie's raw lesson", kind="lesson", priority="high")
    return ids


def test_it_records_how_each_memory_was_written(api_client, tenant, queue):
    _session_note(api_client, "plan", "2. then the signup page")  # an overwrite stays a session note
    singleton = _bulk(api_client, "A bulk write of one item")
    with tenant_context(tenant.id):
        origins = {str(memory_id): origin for memory_id, origin in Memory.objects.values_list("id", "origin")}
    assert origins[queue["note"]] == Origin.SINGLE
    assert origins[queue["session_note"]] == Origin.SESSION_NOTE
    bulk = [queue["bulk_tabs"], queue["bulk_dark_mode"], *singleton]
    assert [origins[memory_id] for memory_id in bulk] == [Origin.BULK] * 3


def test_it_lists_what_needs_a_person_first_and_leaves_out_bulk_writes_and_session_notes(tenant, queue):
    page = _admin_of(tenant).get(URL).content.decode()
    expected = ["pinning", "conclusion", "decision", "lesson", "high_preference", "note"]
    assert _listed(page) == [queue[name] for name in expected]
    assert "charlie" not in page


@pytest.mark.parametrize(
    ("show", "expected"),
    [
        ("session_notes", ["session_note"]),
        ("bulk", ["bulk_dark_mode", "bulk_tabs"]),
        ("all", ["pinning", "conclusion", "decision", "lesson",
                 "bulk_dark_mode", "bulk_tabs", "session_note", "high_preference", "note"]),
        ("review", ["pinning", "conclusion", "decision", "lesson", "high_preference", "note"]),
    ],
)  # fmt: skip
def test_the_filter_shows_each_category_in_review_order(tenant, queue, show, expected):
    page = _admin_of(tenant).get(URL, {"show": show}).content.decode()
    assert _listed(page) == [queue[name] for name in expected]
    assert "charlie" not in page


def test_each_category_shows_its_count_of_the_tenants_raw_memories(tenant, queue):
    page = _admin_of(tenant).get(URL).content.decode()
    filters = page[page.index('id="changelist-filter"') :]
    for label in ("Needs review (6)", "Session notes (1)", "Bulk writes (2)", "All raw memories (9)"):
        assert label in filters
    selected = re.search(r'<li class="selected">\s*<a [^>]*>([^<]+)</a>', filters).group(1)
    assert selected == "Needs review (6)"


def test_the_page_reads_plainly(tenant, queue):
    client = _admin_of(tenant)
    page = client.get(URL).content.decode()
    assert "<h1>Review queue</h1>" in page and "<title>Review queue |" in page
    assert "6 memories awaiting review" in page
    assert "Select memory" not in page and "to change" not in page and "(ies)" not in page
    index = client.get("/admin/").content.decode()
    assert "Memories awaiting review" in index and "View site" not in index

    one = client.post(URL, {"action": "promote_selected", "_selected_action": [queue["note"]]}, follow=True)
    assert "Promoted 1 memory to validated." in one.content.decode()
    two = [queue["lesson"], queue["decision"]]
    many = client.post(URL, {"action": "promote_selected", "_selected_action": two}, follow=True)
    assert "Promoted 2 memories to validated." in many.content.decode()
    rejected = client.post(URL, {"action": "reject_selected", "_selected_action": [queue["conclusion"]]}, follow=True)
    assert "Rejected 1 memory." in rejected.content.decode()
    with tenant_context(tenant.id):
        validated = set(Memory.objects.filter(confidence=Confidence.VALIDATED).values_list("id", flat=True))
        assert {str(memory_id) for memory_id in validated} == {queue["validated"], queue["note"], *two}
        assert not Memory.objects.filter(id=queue["conclusion"]).exists()


def test_another_tenants_admin_neither_sees_nor_decides_our_memories(tenant, other_tenant, queue):
    client = _admin_of(other_tenant)
    page = client.get(URL, {"show": "all"}).content.decode()
    assert _listed(page) == [queue["charlie"]]
    assert "All raw memories (1)" in page
    for action in ("promote_selected", "reject_selected"):
        client.post(URL, {"action": action, "_selected_action": [queue["pinning"], queue["lesson"]]})
    assert client.get(f"{URL}{queue['pinning']}/change/").status_code in (302, 404)
    with tenant_context(tenant.id):
        kept = Memory.objects.filter(id__in=[queue["pinning"], queue["lesson"]], confidence=Confidence.RAW)
        assert kept.count() == 2
