"""Proposals and AGENTS.md versions go into whole-tenant archives."""

import io

import pytest

from memory_service.exports.archive import verify_archive
from memory_service.exports.services import export_job_run
from tests.conftest import client_for
from tests.exports.helpers import download, jsonl
from tests.factories import make_tenant, make_token


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_exports_proposals_and_agents_md_versions():
    tenant = make_tenant("documented")
    client = client_for(make_token(tenant, permissions=["export", "admin", "proposals:write"]).raw)
    imported = client.put("/api/v1/repositories/r1/agents-md", "# AGENTS\n\n## Build\n\n- make\n",
                          content_type="text/markdown")  # fmt: skip
    assert imported.status_code in (200, 201), imported.content
    filed = client.post("/api/v1/proposals", {"repository": "r1", "section": "## Build",
                                              "addition": "Run make lint first", "reasoning": "CI failed twice"},
                        format="json")  # fmt: skip
    assert filed.status_code == 201, filed.content
    job_id = client.post("/api/v1/exports", {}, format="json").json()["id"]
    export_job_run(tenant_id=tenant.id, job_id=job_id)
    archive = download(client, job_id)
    counts = {f["name"]: f["count"] for f in verify_archive(io.BytesIO(archive))["files"]}
    assert counts["proposals.jsonl"] == 1 and counts["agents_md_versions.jsonl"] == 1
    assert jsonl(archive, "proposals.jsonl")[0]["addition"] == "Run make lint first"
    assert "## Build" in jsonl(archive, "agents_md_versions.jsonl")[0]["text"]
    # A user's export leaves them out: they belong to repositories.
    user_job = client.post("/api/v1/exports", {"user": "u1"}, format="json").json()["id"]
    export_job_run(tenant_id=tenant.id, job_id=user_job)
    names = {f["name"] for f in verify_archive(io.BytesIO(download(client, user_job)))["files"]}
    assert names == {"memories.jsonl", "supersessions.jsonl", "audit_events.jsonl"}
