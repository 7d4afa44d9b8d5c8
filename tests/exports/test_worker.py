"""An export of a tenant with 10,000 memories through a real worker: the manifest's checksums
verify, and counts and contents match the database."""

import hashlib
import io
import zipfile

import pytest

from audit.models import AuditEvent
from memory_service.exports.archive import verify_archive
from memory_service.memories.models import Memory
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.exports.helpers import download, jsonl, wait_for_status
from tests.factories import make_memories, make_tenant, make_token

transactional = pytest.mark.django_db(transaction=True, databases=["default", "admin"])


def _events(tenant, **filters) -> list[AuditEvent]:
    with tenant_context(tenant.id):
        return list(AuditEvent.objects.for_tenant(tenant).filter(**filters).order_by("seq"))


def _start(client, body=None) -> str:
    response = client.post("/api/v1/exports", body or {}, format="json")
    assert response.status_code == 202
    return response.json()["id"]


@pytest.mark.worker
@transactional
def test_it_exports_10000_memories_through_a_worker(celery_worker_process):
    tenant = make_tenant("bigco")
    client = client_for(make_token(tenant, permissions=["export", "memory:read", "memory:write"]).raw)
    make_memories(tenant, 9_990)
    for i in range(10):
        client.post("/api/v1/memories", {"scope": "user", "user": "u7", "text": f"Preference number {i}"},
                    format="json")  # fmt: skip
    job_id = _start(client)
    job = wait_for_status(tenant, job_id)
    assert job.status == "succeeded" and job.progress == 100 and job.attempts == 1
    detail = client.get(f"/api/v1/exports/{job_id}").json()
    assert detail["counts"]["memories"] == 10_000 and detail["finished_at"] and detail["expires_at"]

    archive = download(client, job_id)
    assert hashlib.sha256(archive).hexdigest() == detail["sha256"] and len(archive) == detail["size_bytes"]
    manifest = verify_archive(io.BytesIO(archive))
    assert manifest["tenant"] == "bigco" and manifest["user"] is None and manifest["export_id"] == job_id
    names = {f["name"]: f["count"] for f in manifest["files"]}
    assert set(names) >= {"memories.jsonl", "supersessions.jsonl", "audit_events.jsonl"}
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        assert sorted(opened.namelist()) == sorted([*names, "manifest.json"])

    memories = jsonl(archive, "memories.jsonl")
    with tenant_context(tenant.id):
        stored = {str(m["id"]): m for m in Memory.objects.for_tenant(tenant).values("id", "text", "scope", "user")}
    assert len(memories) == names["memories.jsonl"] == len(stored) == 10_000
    assert {m["id"]: (m["text"], m["scope"], m["user"]) for m in memories} == {
        k: (v["text"], v["scope"], v["user"]) for k, v in stored.items()
    }
    events = jsonl(archive, "audit_events.jsonl")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    in_db = _events(tenant, seq__lte=len(events))
    assert [(e["action"], e["hash"]) for e in events] == [(e.action, e.hash) for e in in_db]
    assert events[-1]["action"] == "export_started"
