"""The write path: masking, idempotency, scopes, bindings, bad input, and other tenants."""

import pytest
from django.db import connection

from audit.models import AuditEvent
from memory_service.memories.models import Memory
from tenants.context import tenant_context
from tenants.masking import tenant_pii_policy_set
from tests.conftest import client_for
from tests.factories import as_labels, make_token

pytestmark = pytest.mark.django_db

EMAIL = "taro.yamada@example.co.jp"
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _stored(tenant, memory_id) -> Memory:
    with tenant_context(tenant.id):
        return Memory.objects.get(id=memory_id)


def test_it_stores_a_masked_memory_and_reports_counts(write, tenant):
    response = write(text=f"Mail {EMAIL} about the deploy; token {SECRET}", title="deploy", tags=["ops"])
    assert response.status_code == 201
    body = response.json()
    assert body["pii"] == {"EMAIL_ADDRESS": 1, "SECRET": 1}
    assert EMAIL not in body["text"] and SECRET not in body["text"]
    assert "<EMAIL_ADDRESS_" in body["text"] and "<SECRET>" in body["text"]
    assert body["embedding_status"] == "pending" and body["confidence"] == "raw" and body["status"] == "current"
    stored = _stored(tenant, body["id"])
    assert stored.text == body["text"] and stored.masker_version and stored.author == "u1"


def test_it_masks_title_tags_metadata_and_solved_query(write):
    body = write(
        text="note",
        title=f"from {EMAIL}",
        tags=[EMAIL],
        metadata={"contact": EMAIL, "n": 3},
        solved_query=f"ask {EMAIL}",
    ).json()
    assert EMAIL not in str(body)
    assert body["metadata"]["n"] == 3 and body["pii"] == {"EMAIL_ADDRESS": 4}


def test_it_leaves_no_raw_pii_in_any_table(write, tenant):
    write(text=f"call 090-1234-5678, mail {EMAIL}, key {SECRET}", metadata={"who": EMAIL})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb', 'ARRAY', 'tsvector')"
        )
        columns = cursor.fetchall()
    leaks = []
    with tenant_context(tenant.id), connection.cursor() as cursor:
        for table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE "{column}"::text LIKE ANY(%s)',
                [[f"%{EMAIL}%", f"%{SECRET}%", "%090-1234-5678%"]],
            )
            if cursor.fetchone()[0]:
                leaks.append(f"{table}.{column}")
    assert leaks == []


def test_it_is_idempotent_by_external_id(write):
    first = write(text="same body", external_id="ext-1")
    again = write(text="same body", external_id="ext-1")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    conflict = write(text="another body", external_id="ext-1")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["fields"] == {"external_id": ["Already used with a different body."]}


def test_it_returns_the_existing_memory_for_an_exact_duplicate(write, tenant):
    first = write(text="Use pgbouncer in transaction mode.")
    again = write(text="Use pgbouncer in transaction mode.")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other_owner = write(text="Use pgbouncer in transaction mode.", user="u2")
    assert other_owner.status_code == 201


def test_it_keeps_different_names_that_mask_alike_apart(write, tenant):
    tenant_pii_policy_set(tenant=tenant, mode="label")
    a = write(text="Contact alice@example.com")
    b = write(text="Contact bob@example.com")
    assert a.json()["text"] == b.json()["text"] and a.json()["id"] != b.json()["id"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scope": "user", "user": ""}, "user"),
        ({"scope": "repository", "repository": ""}, "repository"),
        ({"scope": "session", "session": ""}, "session"),
        ({"scope": "planet"}, "scope"),
        ({"kind": "rumour"}, "kind"),
        ({"text": ""}, "text"),
        ({"text": "   "}, "text"),
        ({"user": "bad id with spaces"}, "user"),
        ({"user": "bob@example.com"}, "user"),
        ({"type": "lesson"}, "type"),
        ({"priority": "urgent"}, "priority"),
        ({"metadata": {"bad key": 1}}, "metadata"),
        ({"metadata": [1, 2]}, "metadata"),
        ({"lifecycle": "proposed", "kind": "lesson"}, "lifecycle"),
        ({"supersedes": [{"id": "nope"}]}, "id"),
    ],
)
def test_it_refuses_bad_input_naming_the_field_and_writes_nothing(write, tenant, fields, field):
    response = write(**({"text": "valid text"} | fields))
    assert response.status_code == 400, response.json()
    assert field in str(response.json()["error"]["fields"])
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 0
        assert not AuditEvent.objects.exclude(action="token_created").exists()


def test_it_refuses_text_over_the_limit_with_413(write, tenant):
    response = write(text="x" * (16 * 1024 + 1))
    assert response.status_code == 413
    assert response.json()["error"]["fields"] == {"text": ["At most 16384 bytes."]}
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 0


@pytest.mark.parametrize(
    ("fields", "scope"),
    [
        ({"kind": "preference"}, "user"),
        ({"kind": "profile"}, "user"),
        ({"kind": "lesson"}, "repository"),
        ({"kind": "decision"}, "repository"),
        ({"kind": "conclusion"}, "repository"),
        ({}, "repository"),  # a note
        ({"kind": "preference", "scope": "repository"}, "repository"),  # a given scope wins
        ({"kind": "lesson", "scope": "user"}, "user"),
    ],
)
def test_it_files_a_memory_without_a_scope_by_its_kind(tenant, fields, scope):
    client = client_for(make_token(tenant, user="u1").raw)
    response = client.post("/api/v1/memories", {"text": "tabs, not spaces", "repository": "r1"} | fields, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["scope"] == scope
    assert (body["user"], body["repository"]) == {"user": ("u1", ""), "repository": ("", "r1")}[scope]
    assert _stored(tenant, body["id"]).scope == scope


def test_it_files_bulk_items_without_a_scope_by_their_kind(tenant):
    client = client_for(make_token(tenant, user="u1").raw)
    items = [{"text": "prefers short answers", "kind": "preference", "repository": "r1"},
             {"text": "retry the flaky test once", "kind": "lesson", "repository": "r1"}]  # fmt: skip
    results = client.post("/api/v1/memories/bulk", {"items": items}, format="json").json()["results"]
    assert [(r["status"], r["memory"]["scope"]) for r in results] == [(201, "user"), (201, "repository")]


def test_it_names_the_missing_owner_of_a_default_scope(tenant):
    unbound = client_for(make_token(tenant).raw)
    lesson = unbound.post("/api/v1/memories", {"text": "x", "kind": "lesson", "user": "u1"}, format="json")
    assert lesson.status_code == 400 and lesson.json()["error"]["fields"] == {"repository": ["Required."]}
    preference = unbound.post("/api/v1/memories", {"text": "x", "kind": "preference"}, format="json")
    assert preference.status_code == 400 and preference.json()["error"]["fields"] == {"user": ["Required."]}
    repositories_only = client_for(make_token(tenant, repositories=["r1"]).raw)
    refused = repositories_only.post("/api/v1/memories", {"text": "x", "kind": "preference"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["fields"] == {"scope": ["Not allowed for this token."]}
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 0


def test_it_binds_a_user_token_to_its_user(tenant, write):
    write(text="u2 private preference", user="u2", kind="preference")
    bound = client_for(make_token(tenant, user="u1").raw)
    named_other = bound.post("/api/v1/memories", {"scope": "user", "user": "u2", "text": "x"}, format="json")
    assert named_other.status_code == 403
    mine = bound.post("/api/v1/memories", {"scope": "user", "text": "my own note"}, format="json")
    assert mine.status_code == 201 and mine.json()["user"] == "u1"
    listed = bound.get("/api/v1/memories").json()["results"]
    assert [m["text"] for m in listed] == ["my own note"]
    assert bound.get("/api/v1/memories", {"user": "u2"}).status_code == 403


def test_it_hides_another_users_memory_from_a_bound_token(tenant, write):
    other = write(text="u2 secret plan", user="u2").json()["id"]
    bound = client_for(make_token(tenant, user="u1").raw)
    assert bound.get(f"/api/v1/memories/{other}").status_code == 404
    assert bound.delete(f"/api/v1/memories/{other}").status_code == 404


def test_it_binds_a_repository_token_to_its_repositories(tenant):
    bound = client_for(make_token(tenant, repositories=["repo-a"]).raw)
    ok = bound.post("/api/v1/memories", {"scope": "repository", "repository": "repo-a", "text": "a"}, format="json")
    assert ok.status_code == 201
    refused = bound.post(
        "/api/v1/memories", {"scope": "repository", "repository": "repo-b", "text": "b"}, format="json"
    )
    assert refused.status_code == 403


def test_it_needs_write_permission_to_write(tenant):
    reader = client_for(make_token(tenant, permissions=["memory:read"]).raw)
    response = reader.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": "x"}, format="json")
    assert response.status_code == 403


def test_it_records_an_offload_audit_event_without_content(write, tenant):
    memory_id = write(text=f"mail {EMAIL}").json()["id"]
    with tenant_context(tenant.id):
        events = list(AuditEvent.objects.filter(action="offload"))
    assert len(events) == 1
    assert events[0].resource_ids == [memory_id]
    assert "mail" not in str(events[0].details) and EMAIL not in str(events[0].details)


def test_it_writes_in_bulk_with_per_item_results(api_client, tenant):
    items = [
        {"scope": "user", "user": "u1", "text": "first"},
        {"scope": "user", "user": "u1", "kind": "rumour", "text": "bad kind"},
        {"scope": "repository", "text": "missing repository"},
        {"scope": "user", "user": "u1", "text": "first"},
    ]
    response = api_client.post("/api/v1/memories/bulk", {"items": items}, format="json")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 400, 200]
    assert results[1]["error"]["fields"] == {"kind": ["Not a valid choice."]}
    assert "repository" in results[2]["error"]["fields"]
    assert results[3]["memory"]["id"] == results[0]["memory"]["id"]
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 1


def test_a_bulk_write_reads_every_note_through_the_name_tier_in_one_batch(api_client, monkeypatch):
    from memory_service.pii import get_masker

    finder = get_masker()._names["en"]
    batches = []
    original = finder.find

    def counted(texts):
        batches.append(list(texts))
        return original(texts)

    monkeypatch.setattr(finder, "find", counted)
    items = [{"scope": "user", "user": "u1", "text": f"Per Priya Raman, note {i}"} for i in range(5)]
    items.append({"scope": "user", "user": "u1", "kind": "rumour", "text": "Ask Maria Gonzalez"})

    results = api_client.post("/api/v1/memories/bulk", {"items": items}, format="json").json()["results"]

    assert [as_labels(result["memory"]["text"]) for result in results[:5]] == [
        f"Per <PERSON>, note {i}" for i in range(5)
    ]
    assert results[5]["status"] == 400
    assert len(batches) == 1  # every string of every item, masked ahead together
    assert {item["text"] for item in items[:5]} <= set(batches[0])  # the refused item needs no masking


def test_it_refuses_a_bulk_over_500_items(api_client):
    items = [{"scope": "user", "user": "u1", "text": f"n{i}"} for i in range(501)]
    response = api_client.post("/api/v1/memories/bulk", {"items": items}, format="json")
    assert response.status_code == 400 and "items" in response.json()["error"]["fields"]


def test_it_edits_with_remasking_and_back_to_raw(api_client, write, tenant):
    memory_id = write(text="original").json()["id"]
    with tenant_context(tenant.id):
        Memory.objects.filter(id=memory_id).update(confidence="validated", embedding_status="ready")
    response = api_client.patch(f"/api/v1/memories/{memory_id}", {"text": f"now mail {EMAIL}"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert as_labels(body["text"]) == "now mail <EMAIL_ADDRESS>" and body["pii"] == {"EMAIL_ADDRESS": 1}
    assert body["confidence"] == "raw" and body["embedding_status"] == "pending"
    assert api_client.patch(f"/api/v1/memories/{memory_id}", {"scope": "repository"}, format="json").status_code == 400


def test_it_deletes(api_client, write, tenant):
    memory_id = write(text="to delete").json()["id"]
    assert api_client.delete(f"/api/v1/memories/{memory_id}").status_code == 204
    assert api_client.get(f"/api/v1/memories/{memory_id}").status_code == 404


def test_it_supersedes_and_derives_the_status(api_client, write):
    old = write(text="Use MySQL", kind="decision", scope="repository", repository="r1", title="db choice").json()
    new = write(text="Use PostgreSQL", kind="decision", scope="repository", repository="r1", title="db v2").json()
    response = api_client.post(f"/api/v1/memories/{old['id']}/supersede", {"by": new["id"]}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "superseded"
    assert response.json()["annotation"] == f"⚠️ superseded → {new['id']} db v2"
    assert response.json()["superseded_by"] == [new["id"]]
    partial = write(text="Use Redis for queues", kind="decision", scope="repository", repository="r1").json()
    api_client.post(f"/api/v1/memories/{partial['id']}/supersede", {"by": new["id"], "partial": True}, format="json")
    assert api_client.get(f"/api/v1/memories/{partial['id']}").json()["status"] == "partially_superseded"


def test_it_supersedes_on_create(api_client, write):
    old = write(text="Deploy on Fridays", kind="decision", scope="repository", repository="r1").json()
    write(text="Never deploy on Fridays", kind="decision", scope="repository", repository="r1",
          supersedes=[{"id": old["id"]}])  # fmt: skip
    assert api_client.get(f"/api/v1/memories/{old['id']}").json()["status"] == "superseded"


def test_superseding_a_missing_or_foreign_memory_is_a_404_naming_the_field(api_client, other_client, write):
    theirs = other_client.post(
        "/api/v1/memories", {"scope": "user", "user": "u1", "kind": "decision", "text": "theirs"}, format="json"
    ).json()
    missing = "2229ad26-91ce-2fb7-96a7-0f22f83f8ffe"
    for memory_id in (missing, theirs["id"]):
        response = api_client.post(
            "/api/v1/memories",
            {"scope": "user", "user": "u1", "kind": "decision", "text": f"replaces {memory_id}",
             "supersedes": [{"id": memory_id}]},
            format="json",
        )  # fmt: skip
        assert response.status_code == 404
        assert response.json()["error"] == {
            "code": "not_found",
            "message": "No such memory to supersede.",
            "fields": {"supersedes": [f"No memory {memory_id}."]},
        }
    assert api_client.get("/api/v1/memories").json()["results"] == []  # nothing stored
    schema = api_client.get("/openapi.json").json()
    assert "404" in schema["paths"]["/api/v1/memories"]["post"]["responses"]


def test_it_promotes_only_with_admin_permission(api_client, write, tenant):
    memory_id = write(text="validated lesson", kind="lesson").json()["id"]
    writer = client_for(make_token(tenant).raw)
    assert writer.post(f"/api/v1/memories/{memory_id}/promote").status_code == 403
    response = api_client.post(f"/api/v1/memories/{memory_id}/promote")
    assert response.status_code == 200 and response.json()["confidence"] == "validated"


def test_it_overwrites_a_session_note_by_name(api_client):
    url = "/api/v1/sessions/s-1/notes/plan"
    first = api_client.put(url, {"text": "step 1", "user": "u1"}, format="json")
    second = api_client.put(url, {"text": "step 1 done; step 2", "user": "u1"}, format="json")
    assert first.status_code == 201 and second.status_code == 200
    assert second.json()["id"] == first.json()["id"] and second.json()["text"] == "step 1 done; step 2"
    assert second.json()["expires_at"] is not None
    listed = api_client.get("/api/v1/memories", {"session": "s-1"}).json()["results"]
    assert len(listed) == 1


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("patch", "", {"text": "stolen"}),
        ("delete", "", None),
        ("post", "/supersede", {"by": "SELF"}),
        ("post", "/promote", None),
    ],
)
def test_it_answers_404_for_another_tenants_memory(write, other_client, method, suffix, body):
    memory_id = write(text="acme only").json()["id"]
    if body and body.get("by") == "SELF":
        body = {"by": memory_id}
    response = getattr(other_client, method)(f"/api/v1/memories/{memory_id}{suffix}", body, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_it_never_lists_another_tenants_memories(write, other_client):
    write(text="acme only")
    assert other_client.get("/api/v1/memories").json() == {"results": [], "next": None}


def test_it_paginates_with_a_cursor(write, api_client):
    for i in range(5):
        write(text=f"note number {i}")
    first = api_client.get("/api/v1/memories", {"limit": 2}).json()
    second = api_client.get("/api/v1/memories", {"limit": 2, "cursor": first["next"]}).json()
    assert len(first["results"]) == 2 and len(second["results"]) == 2
    assert not {m["id"] for m in first["results"]} & {m["id"] for m in second["results"]}
    assert api_client.get("/api/v1/memories", {"cursor": "garbage"}).status_code == 400


def test_it_queues_ids_only_never_text(write, django_capture_on_commit_callbacks):
    from memory_service.redis import get_redis

    redis = get_redis()
    with django_capture_on_commit_callbacks(execute=True):
        memory_id = write(text=f"queue check {EMAIL} {SECRET}").json()["id"]
    dump = b""
    for key in redis.scan_iter(count=1000):
        kind = redis.type(key)
        if kind == b"list":
            dump += b"".join(redis.lrange(key, 0, -1))
        elif kind == b"string":
            dump += redis.get(key) or b""
        elif kind == b"hash":
            dump += b"".join(redis.hvals(key))
    assert memory_id.encode() in dump  # the task message is there (no worker runs in this module)
    assert EMAIL.encode() not in dump and SECRET.encode() not in dump and b"queue check" not in dump


def test_it_keeps_session_notes_of_the_same_name_apart_across_tenants(api_client, other_client):
    url = "/api/v1/sessions/s-1/notes/plan"
    mine = api_client.put(url, {"text": "acme plan", "user": "u1"}, format="json").json()
    theirs = other_client.put(url, {"text": "charlie plan", "user": "u1"}, format="json")
    assert theirs.status_code == 201 and theirs.json()["id"] != mine["id"]
    assert api_client.get(f"/api/v1/memories/{mine['id']}").json()["text"] == "acme plan"


def test_it_answers_404_per_item_when_a_bulk_item_supersedes_another_tenants_memory(write, other_client):
    acme_decision = write(text="acme decision", kind="decision", scope="repository", repository="r1").json()
    item = {"scope": "repository", "repository": "r1", "kind": "decision", "text": "charlie decision",
            "supersedes": [{"id": acme_decision["id"]}]}  # fmt: skip
    results = other_client.post("/api/v1/memories/bulk", {"items": [item]}, format="json").json()["results"]
    assert [r["status"] for r in results] == [404]
    assert other_client.get("/api/v1/memories").json()["results"] == []
