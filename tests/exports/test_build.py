"""Building archives inline (the worker's code in the test process): user exports, audit,
idempotence, retention, the command. Transactional: the builder renews its lease from a second
connection. No worker runs in this module, so no job is built twice."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit.models import AuditEvent
from memory_service.exports.archive import verify_archive
from memory_service.exports.models import ExportJob, ExportStatus, archive_dir
from memory_service.exports.services import export_job_run
from memory_service.memories.models import ActivityLog, Memory
from memory_service.retention.services import tenant_retention_purge
from memory_service.retention.tasks import retention_purge_task
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.exports.helpers import download, job_row, jsonl
from tests.factories import make_memories, make_tenant, make_token

transactional = pytest.mark.django_db(transaction=True, databases=["default", "admin"])


def _events(tenant, **filters) -> list[AuditEvent]:
    with tenant_context(tenant.id):
        return list(AuditEvent.objects.for_tenant(tenant).filter(**filters).order_by("seq"))


def _start(client, body=None) -> str:
    response = client.post("/api/v1/exports", body or {}, format="json")
    assert response.status_code == 202
    return response.json()["id"]


@transactional
def test_it_exports_one_users_data_and_audits_each_step_once(tmp_path):
    tenant = make_tenant("userco")
    issued = make_token(tenant, permissions=["export", "memory:read", "memory:write"])
    client = client_for(issued.raw)
    for user, text in (("u1", "Use tabs in Makefiles"), ("u2", "Prefer short functions")):
        client.post("/api/v1/memories", {"scope": "user", "user": user, "text": text}, format="json")
    client.post("/api/v1/memories", {"scope": "repository", "repository": "r1", "user": "u1",
                                     "text": "Deploy on Tuesdays"}, format="json")  # fmt: skip
    job_id = _start(client, {"user": "u1"})
    job = export_job_run(tenant_id=tenant.id, job_id=job_id)
    assert job.status == ExportStatus.SUCCEEDED and job.counts["memories"] == 2
    archive = download(client, job_id)
    manifest = verify_archive(io.BytesIO(archive))
    assert manifest["user"].startswith("u_") and "u1" not in json.dumps(manifest)
    texts = sorted((m["text"], m["origin"]) for m in jsonl(archive, "memories.jsonl"))
    assert texts == [("Deploy on Tuesdays", "single"), ("Use tabs in Makefiles", "single")]
    # The audit events naming u1's pseudonym: its two writes and the export's start.
    actions = [e["action"] for e in jsonl(archive, "audit_events.jsonl")]
    assert actions == ["offload", "offload", "export_started"]

    events = _events(tenant, resource_ids__contains=[job_id])
    assert [e.action for e in events] == ["export_started", "export_finished", "export_downloaded"]
    started, finished, downloaded = events
    assert started.actor == downloaded.actor == f"token:{issued.token.prefix}:agent"
    assert finished.actor == f"system:export:{job_id}"
    assert finished.details == {"status": "succeeded", "counts": job.counts, "bytes": job.size_bytes, "attempts": 1}
    assert downloaded.details == {"bytes": job.size_bytes}
    for event in events:
        assert "u1" not in json.dumps(event.details) and "Makefiles" not in json.dumps(event.details)


@transactional
def test_it_exports_each_turn_of_a_conversation_with_the_turn_it_follows():
    tenant = make_tenant("threadco")
    client = client_for(make_token(tenant, permissions=["export", "memory:read", "memory:write"]).raw)
    turns = [{"scope": "user", "user": "u1", "kind": "note", "text": text, "occurred_at": "2026-05-08T13:00:00Z"}
             for text in ("how was the trip?", "long, but the boat held")]  # fmt: skip
    response = client.post("/api/v1/memories/bulk", {"items": turns}, format="json")
    first, second = (r["memory"]["id"] for r in response.json()["results"])
    job_id = _start(client, {"user": "u1"})
    export_job_run(tenant_id=tenant.id, job_id=job_id)
    rows = {m["id"]: m["thread_previous_id"] for m in jsonl(download(client, job_id), "memories.jsonl")}
    assert rows == {first: None, second: first}


@transactional
def test_it_does_not_build_a_job_twice():
    tenant = make_tenant("twice")
    client = client_for(make_token(tenant, permissions=["export"]).raw)
    job_id = _start(client)
    assert export_job_run(tenant_id=tenant.id, job_id=job_id) is not None
    first = job_row(tenant, job_id)
    assert export_job_run(tenant_id=tenant.id, job_id=job_id) is None  # a redelivered message
    assert job_row(tenant, job_id).sha256 == first.sha256 and job_row(tenant, job_id).attempts == 1
    assert [p.name for p in archive_dir(tenant.id).iterdir()] == [f"{job_id}.zip"]
    assert len(_events(tenant, action="export_finished")) == 1


@transactional
def test_it_purges_expired_session_memories_and_archives_with_one_audited_purge():
    tenant = make_tenant("retained")
    client = client_for(make_token(tenant, permissions=["export", "memory:read", "memory:write"]).raw)
    past = timezone.now() - timedelta(hours=1)
    make_memories(tenant, 5, prefix="expired", scope="session", session="s1", user="u1", repository="", expires_at=past)
    make_memories(tenant, 3, prefix="live", scope="session", session="s2", user="u1", repository="",
                  expires_at=timezone.now() + timedelta(hours=1))  # fmt: skip
    make_memories(tenant, 2, prefix="repo")
    with tenant_context(tenant.id):
        ActivityLog.objects.create(tenant=tenant, operation="search", at=timezone.now() - timedelta(days=91))
        ActivityLog.objects.create(tenant=tenant, operation="search", at=timezone.now() - timedelta(days=89))
    job_id = _start(client)
    job = export_job_run(tenant_id=tenant.id, job_id=job_id)
    assert job.expires_at - job.finished_at == timedelta(hours=72) and job.archive_path.is_file()
    with tenant_context(tenant.id):
        ExportJob.objects.filter(id=job_id).update(expires_at=past)

    assert retention_purge_task() >= 1
    with tenant_context(tenant.id):
        texts = sorted(Memory.objects.for_tenant(tenant).values_list("text", flat=True))
    assert len(texts) == 5 and not any(t.startswith("expired") for t in texts)
    with tenant_context(tenant.id):
        assert ActivityLog.objects.for_tenant(tenant).count() == 1
    assert not job.archive_path.exists() and job_row(tenant, job_id).status == ExportStatus.EXPIRED
    assert client.get(f"/api/v1/exports/{job_id}/download").status_code == 410
    assert client.get(f"/api/v1/exports/{job_id}").json()["status"] == "expired"
    purges = _events(tenant, action="purge")
    assert len(purges) == 1 and purges[0].actor == "system:retention"
    assert purges[0].details == {"counts": {"session_memories": 5, "embeddings": 0, "supersessions": 0,
                                            "archives": 1, "activity": 1}}  # fmt: skip
    # Nothing left to purge: no further event.
    assert not tenant_retention_purge(tenant=tenant).any()
    assert len(_events(tenant, action="purge")) == 1


@transactional
def test_it_keeps_a_tenants_own_retention_settings():
    tenant = make_tenant("short")
    with tenant_context(tenant.id):
        type(tenant).objects.filter(id=tenant.id).update(export_retention_hours=2, session_ttl_hours=1)
        tenant.refresh_from_db()
    client = client_for(make_token(tenant, permissions=["export", "memory:write"]).raw)
    note = client.put("/api/v1/sessions/s1/notes/plan", {"text": "Step one", "user": "u1"}, format="json").json()
    with tenant_context(tenant.id):
        memory = Memory.objects.get(id=note["id"])
    assert timedelta(minutes=59) < memory.expires_at - memory.created_at <= timedelta(hours=1)
    job = export_job_run(tenant_id=tenant.id, job_id=_start(client))
    assert job.expires_at - job.finished_at == timedelta(hours=2)


@transactional
def test_it_builds_an_export_from_the_command_line(capsys):
    tenant = make_tenant("cli")
    make_memories(tenant, 120)
    call_command("export_tenant", "cli")
    out = capsys.readouterr().out
    assert "memories 120" in out
    path = out.strip().splitlines()[-1]
    assert verify_archive(path)["tenant"] == "cli"
    started = _events(tenant, action="export_started")
    assert len(started) == 1 and started[0].actor == "system:export_tenant"
