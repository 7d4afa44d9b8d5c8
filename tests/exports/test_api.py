"""The export endpoints: permissions, bindings, input, other tenants, statuses."""

import pytest

from audit.models import AuditEvent
from memory_service.exports.models import ExportJob, ExportStatus
from tenants.context import tenant_context
from tests.conftest import client_for
from tests.factories import make_token

pytestmark = pytest.mark.django_db


def _start(client, body=None):
    response = client.post("/api/v1/exports", body or {}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def test_it_starts_a_queued_export_of_the_tenant(api_client, tenant):
    body = _start(api_client)
    assert body["status"] == "queued" and set(body) == {"id", "status"}
    detail = api_client.get(f"/api/v1/exports/{body['id']}").json()
    assert detail["status"] == "queued" and detail["progress"] == 0 and detail["user"] == ""
    assert detail["created_at"] and detail["finished_at"] is None and detail["expires_at"] is None
    with tenant_context(tenant.id):
        assert ExportJob.objects.get(id=body["id"]).tenant_id == tenant.id


def test_it_exports_one_user_when_asked(api_client, tenant):
    body = _start(api_client, {"user": "u1"})
    assert api_client.get(f"/api/v1/exports/{body['id']}").json()["user"] == "u1"


def test_it_hides_an_export_from_another_tenant(api_client, other_client, other_tenant):
    job_id = _start(api_client)["id"]
    assert other_client.get(f"/api/v1/exports/{job_id}").status_code == 404
    assert other_client.get(f"/api/v1/exports/{job_id}/download").status_code == 404
    assert other_client.get(f"/api/v1/exports/{job_id}").json()["error"]["code"] == "not_found"
    # The other tenant starts its own export, which the first cannot see.
    other_id = _start(other_client)["id"]
    with tenant_context(other_tenant.id):
        assert ExportJob.objects.get(id=other_id).tenant_id == other_tenant.id
    assert api_client.get(f"/api/v1/exports/{other_id}").status_code == 404


def test_it_answers_404_for_a_malformed_or_unknown_id(api_client):
    assert api_client.get("/api/v1/exports/not-a-uuid").status_code == 404
    assert api_client.get("/api/v1/exports/00000000-0000-0000-0000-000000000000/download").status_code == 404


def test_it_needs_the_export_permission(tenant, api_client):
    job_id = _start(api_client)["id"]
    reader = client_for(make_token(tenant, name="reader", permissions=["memory:read", "admin"]).raw)
    for response in (
        reader.post("/api/v1/exports", {}, format="json"),
        reader.get(f"/api/v1/exports/{job_id}"),
        reader.get(f"/api/v1/exports/{job_id}/download"),
    ):
        assert response.status_code == 403
        assert "export" in response.json()["error"]["message"]


def test_it_refuses_an_invalid_user_naming_the_field(api_client, tenant):
    for user in ("not valid!", "someone@example.com", "x" * 129):
        response = api_client.post("/api/v1/exports", {"user": user}, format="json")
        assert response.status_code == 400
        error = response.json()["error"]
        assert "user" in error["fields"] and user not in response.content.decode()
    assert api_client.post("/api/v1/exports", {"type": "all"}, format="json").status_code == 400
    with tenant_context(tenant.id):
        assert not ExportJob.objects.exists()


def test_it_lets_a_user_bound_token_export_only_its_user(tenant, api_client):
    bound = client_for(make_token(tenant, name="bound", permissions=["export"], user="u1").raw)
    response = bound.post("/api/v1/exports", {"user": "u2"}, format="json")
    assert response.status_code == 403 and response.json()["error"]["fields"] == {"user": ["Not this token's user."]}
    own = _start(bound)
    assert bound.get(f"/api/v1/exports/{own['id']}").json()["user"] == "u1"
    tenant_wide = _start(api_client)["id"]
    assert bound.get(f"/api/v1/exports/{tenant_wide}").status_code == 404


def test_it_refuses_a_repository_bound_token(tenant):
    bound = client_for(make_token(tenant, name="repo", permissions=["export"], repositories=["r1"]).raw)
    assert bound.post("/api/v1/exports", {}, format="json").status_code == 403


def test_it_answers_409_before_the_archive_exists_and_410_after_it_expired(api_client, tenant):
    job_id = _start(api_client)["id"]
    response = api_client.get(f"/api/v1/exports/{job_id}/download")
    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
    with tenant_context(tenant.id):
        ExportJob.objects.filter(id=job_id).update(status=ExportStatus.EXPIRED)
    response = api_client.get(f"/api/v1/exports/{job_id}/download")
    assert response.status_code == 410 and response.json()["error"]["code"] == "gone"
    assert api_client.get(f"/api/v1/exports/{job_id}").json()["status"] == "expired"


def test_it_audits_the_start_once_without_the_user_id(api_client, tenant):
    job_id = _start(api_client, {"user": "u1"})["id"]
    with tenant_context(tenant.id):
        events = list(AuditEvent.objects.for_tenant(tenant).filter(resource_ids__contains=[job_id]))
    assert [e.action for e in events] == ["export_started"]
    assert events[0].actor.startswith("token:") and events[0].resource_type == "export"
    assert events[0].details["user"].startswith("u_") and "u1" not in str(events[0].details)


def test_it_documents_the_endpoints_in_the_schema(api_client):
    schema = api_client.get("/api/schema/").content.decode()
    for path in ("/api/v1/exports", "/api/v1/exports/{export_id}", "/api/v1/exports/{export_id}/download",
                 "/api/v1/erasures"):  # fmt: skip
        assert f"{path}:" in schema
