"""Erasure of one user: no trace of the user's text anywhere, archives that held it gone, audited
once under the user's pseudonym."""

import json

import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from audit.services import user_pseudonym
from memory_service.exports.models import ExportJob, ExportStatus
from memory_service.exports.services import export_job_run
from memory_service.memories.embedding import embed_memories, pending_memory_ids
from memory_service.memories.models import Memory, MemoryEmbedding
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.factories import make_tenant, make_token
from tests.scan import database_occurrences

transactional = pytest.mark.django_db(transaction=True, databases=["default", "admin"])
ERASED = "erasable-user-7"
MARKER = "quokkafest"


def _write(client, **body):
    response = client.post("/api/v1/memories", {"kind": "lesson"} | body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _seed(tenant, client):
    mine = [
        _write(client, scope="user", user=ERASED, text=f"The {MARKER} lesson: never deploy on Fridays"),
        _write(client, scope="repository", repository="r1", user=ERASED, text=f"Cache keys for {MARKER} expire"),
        _write(client, scope="session", session="s1", user=ERASED, text=f"Plan for {MARKER} session"),
    ]
    theirs = _write(client, scope="repository", repository="r1", user="u2", text="Pin the base image by digest")
    assert client.post(f"/api/v1/memories/{theirs}/supersede", {"by": mine[1]}, format="json").status_code == 200
    with tenant_context(tenant.id):
        embed_memories(tenant_id=str(tenant.id), memory_ids=pending_memory_ids(tenant_id=str(tenant.id), limit=100))
    search = {"query": f"{MARKER} lesson", "user": ERASED, "repository": "r1"}
    assert client.post("/api/v1/search", search, format="json").json()["items"]
    # u2's stored digest of r1 quotes the erased user's repository lesson.
    assert MARKER in client.get("/api/v1/context", {"user": "u2", "repository": "r1"}).content.decode()
    return mine, theirs


@transactional
def test_it_erases_every_trace_of_the_users_text_and_the_archives_that_hold_it():
    tenant = make_tenant("erasing")
    admin = make_token(tenant, permissions=["memory:read", "memory:write", "export", "admin"])
    client = client_for(admin.raw)
    mine, theirs = _seed(tenant, client)
    jobs = {}
    for name, user in (("tenant", ""), ("erased", ERASED), ("other", "u2")):
        job_id = client.post("/api/v1/exports", {"user": user}, format="json").json()["id"]
        jobs[name] = export_job_run(tenant_id=tenant.id, job_id=job_id)
    assert database_occurrences(MARKER)  # the text is there before

    response = client.post("/api/v1/erasures", {"user": ERASED}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "user": user_pseudonym(ERASED), "memories": 3, "embeddings": 3, "supersessions": 1, "activity": 4,
        "session_contexts": 1, "archives": 2,
    }  # fmt: skip

    assert database_occurrences(MARKER) == []
    assert database_occurrences(ERASED, skip=("tenants_apitoken",)) == []  # a token's binding names its user
    hits = client.post("/api/v1/search", {"query": f"{MARKER} lesson", "repository": "r1", "user": "u2"},
                       format="json").json()  # fmt: skip
    assert not {item["id"] for item in hits["items"]} & set(mine) and MARKER not in json.dumps(hits)
    assert MARKER not in client.get("/api/v1/context", {"user": "u2", "repository": "r1"}).content.decode()
    with tenant_context(tenant.id):
        assert not Memory.objects.filter(id__in=mine).exists() and Memory.objects.filter(id=theirs).exists()
        assert not MemoryEmbedding.objects.filter(memory_id__in=mine).exists()
        statuses = dict(ExportJob.objects.values_list("id", "status"))
    assert statuses[jobs["tenant"].id] == statuses[jobs["erased"].id] == ExportStatus.ERASED
    assert statuses[jobs["other"].id] == ExportStatus.SUCCEEDED
    assert not jobs["tenant"].archive_path.exists() and not jobs["erased"].archive_path.exists()
    assert jobs["other"].archive_path.is_file()
    assert client.get(f"/api/v1/exports/{jobs['tenant'].id}/download").status_code == 410

    with tenant_context(tenant.id):
        erasures = list(AuditEvent.objects.for_tenant(tenant).filter(action="erase"))
    assert len(erasures) == 1
    event = erasures[0]
    assert event.actor == f"token:{admin.token.prefix}:agent" and event.resource_ids == [user_pseudonym(ERASED)]
    assert event.details["user"] == user_pseudonym(ERASED) and event.details["counts"]["memories"] == 3
    assert ERASED not in json.dumps(event.details) and MARKER not in json.dumps(event.details)


@transactional
def test_it_needs_the_admin_permission_and_a_valid_user():
    tenant = make_tenant("guarded")
    writer = client_for(make_token(tenant, permissions=["memory:write", "export"]).raw)
    _write(writer, scope="user", user="u1", text="Keep me")
    assert writer.post("/api/v1/erasures", {"user": "u1"}, format="json").status_code == 403
    admin = client_for(make_token(tenant, name="admin", permissions=["admin"]).raw)
    for body in ({}, {"user": "bad user!"}, {"user": "a@b.example"}):
        response = admin.post("/api/v1/erasures", body, format="json")
        assert response.status_code == 400 and "user" in response.json()["error"]["fields"]
    with tenant_context(tenant.id):
        assert Memory.objects.count() == 1 and not AuditEvent.objects.filter(action="erase").exists()


@transactional
def test_it_leaves_other_tenants_alone():
    tenant, other = make_tenant("first"), make_tenant("second")
    first = client_for(make_token(tenant, permissions=["memory:write", "admin"]).raw)
    second = client_for(make_token(other, permissions=["memory:write", "admin"]).raw)
    _write(first, scope="user", user="u1", text="First tenant's lesson")
    _write(second, scope="user", user="u1", text="Second tenant's lesson")
    assert second.post("/api/v1/erasures", {"user": "u1"}, format="json").json()["memories"] == 1
    with tenant_context(tenant.id):
        assert Memory.objects.filter(user="u1").count() == 1


@transactional
def test_it_erases_from_the_command_line(capsys):
    tenant = make_tenant("cli-erase")
    client = client_for(make_token(tenant, permissions=["memory:write"]).raw)
    _write(client, scope="user", user="u1", text="A lesson to forget")
    call_command("erase_user", "--tenant", "cli-erase", "--user", "u1")
    assert json.loads(capsys.readouterr().out)["memories"] == 1
    with tenant_context(tenant.id):
        event = AuditEvent.objects.for_tenant(tenant).get(action="erase")
    assert event.actor == "system:erase_user" and event.details["user"] == user_pseudonym("u1")
