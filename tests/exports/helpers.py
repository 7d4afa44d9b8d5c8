"""Shared steps of the export tests."""

import io
import time
import zipfile

from memory_service.exports.models import ExportJob
from tenants.context import tenant_context


def job_row(tenant, job_id) -> ExportJob:
    with tenant_context(tenant.id):
        return ExportJob.objects.get(id=job_id)


def wait_for_status(tenant, job_id, statuses=("succeeded", "failed"), timeout: float = 180) -> ExportJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = job_row(tenant, job_id)
        if job.status in statuses:
            return job
        time.sleep(0.2)
    raise AssertionError(f"export {job_id} still {job.status} after {timeout} s")


def download(client, job_id) -> bytes:
    response = client.get(f"/api/v1/exports/{job_id}/download")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/zip"
    return b"".join(response.streaming_content)


def jsonl(archive_bytes: bytes, name: str) -> list[dict]:
    import json

    with zipfile.ZipFile(io.BytesIO(archive_bytes)) as archive:
        return [json.loads(line) for line in archive.read(name).splitlines()]
