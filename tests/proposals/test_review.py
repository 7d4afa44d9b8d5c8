"""Deciding proposals (services and admin) and the review queue of raw memories."""

import threading
from datetime import date

import pytest
from django.db import connection
from django.test import Client

from audit.models import AuditEvent
from memory_service.exceptions import ConflictError, ValidationError
from memory_service.memories.models import Confidence, Memory
from proposals.models import AgentsDocumentVersion, Proposal, ProposalStatus
from proposals.services import proposal_approve, proposal_reject
from tenants.context import tenant_context
from tenants.models import User
from tests.conftest import client_for
from tests.factories import as_labels, make_tenant, make_token

DOC = "# AGENTS.md\n\n## Boundaries\n\n### Always\n- Read existing patterns first\n\n### Never\n- Commit secrets\n"
PROPOSAL = {
    "repository": "web",
    "section": "### Always",
    "addition": "Run `pnpm typecheck` after editing TS files",
    "reasoning": "CI failed twice on type errors.",
}
ADMIN_URL = "/admin/proposals/proposal/"


def _file(client, **change) -> str:
    response = client.post("/api/v1/proposals", PROPOSAL | change, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()["id"]


def _events(tenant, action):
    with tenant_context(tenant.id):
        return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def _admin_of(tenant, name=None) -> Client:
    client = Client()
    user = User.objects.create_user(name or f"admin-{tenant.slug}", password="x", is_staff=True, tenant=tenant)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_approval_adds_the_line_under_its_section_as_a_new_version(tenant, api_client):
    api_client.put("/api/v1/repositories/web/agents-md", data=DOC.encode(), content_type="text/markdown")
    proposal_id = _file(api_client)
    proposal = proposal_approve(tenant=tenant, actor="admin:alice", proposal_id=proposal_id, on=date(2026, 3, 15))
    assert proposal.status == ProposalStatus.APPROVED and proposal.decided_by == "admin:alice"
    served = api_client.get("/api/v1/repositories/web/agents-md")
    assert served["X-AgentsMd-Version"] == "2"
    assert served.content.decode() == DOC.replace(
        "- Read existing patterns first\n",
        "- Read existing patterns first\n- 🤖 Added 2026-03-15: Run `pnpm typecheck` after editing TS files\n",
    )
    with tenant_context(tenant.id):
        version = AgentsDocumentVersion.objects.get(number=2)
        assert version.proposal_id == proposal.id and version.created_by == "admin:alice"
        assert version.source == "approved"
    [event] = _events(tenant, "proposal_approved")
    assert event.actor == "admin:alice" and event.resource_type == "proposal"
    assert event.resource_ids == [str(proposal.id)]
    assert event.details == {"repository": "web", "version": 2, "version_id": version.id}
    listed = api_client.get("/api/v1/proposals").json()["results"]
    assert listed[0]["status"] == "approved" and listed[0]["version"] == 2


@pytest.mark.django_db
def test_approval_without_a_document_creates_it_and_a_new_section(tenant, api_client):
    proposal_id = _file(api_client, section="Testing")
    proposal_approve(tenant=tenant, actor="admin:alice", proposal_id=proposal_id, on=date(2026, 3, 15))
    text = api_client.get("/api/v1/repositories/web/agents-md").content.decode()
    assert text == "## Testing\n\n- 🤖 Added 2026-03-15: Run `pnpm typecheck` after editing TS files\n"


@pytest.mark.django_db
def test_a_decided_proposal_cannot_be_decided_again(tenant, api_client):
    approved, rejected = _file(api_client), _file(api_client, addition="Prefer pnpm over npm")
    proposal_approve(tenant=tenant, actor="admin:alice", proposal_id=approved)
    with pytest.raises(ValidationError):
        proposal_reject(tenant=tenant, actor="admin:bob", proposal_id=rejected, note="  ")
    proposal_reject(tenant=tenant, actor="admin:bob", proposal_id=rejected, note="We use npm; ask carol@example.com")
    for proposal_id in (approved, rejected):
        with pytest.raises(ConflictError):
            proposal_approve(tenant=tenant, actor="admin:bob", proposal_id=proposal_id)
        with pytest.raises(ConflictError):
            proposal_reject(tenant=tenant, actor="admin:bob", proposal_id=proposal_id, note="no")
    with tenant_context(tenant.id):
        assert AgentsDocumentVersion.objects.count() == 1
        stored = Proposal.objects.get(id=rejected)
    assert stored.status == "rejected" and as_labels(stored.decision_note) == "We use npm; ask <EMAIL_ADDRESS>"
    [event] = _events(tenant, "proposal_rejected")
    assert event.resource_ids == [rejected] and event.details == {"repository": "web", "pii": {"EMAIL_ADDRESS": 1}}
    assert len(_events(tenant, "proposal_approved")) == 1
    assert api_client.get(f"/api/v1/proposals/{rejected}").json()["decision_note"].startswith("We use npm")


@pytest.mark.django_db
def test_another_tenant_cannot_decide_a_proposal(tenant, other_tenant, api_client):
    proposal_id = _file(api_client)
    with pytest.raises(Exception) as error:
        proposal_approve(tenant=other_tenant, actor="admin:mallory", proposal_id=proposal_id)
    assert error.value.__class__.__name__ == "NotFoundError"


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_two_admins_approving_at_once_make_exactly_one_version():
    tenant = make_tenant("race")
    client = client_for(make_token(tenant, permissions=["memory:read", "proposals:write", "admin"]).raw)
    proposal_id = _file(client)
    other_id = _file(client, addition="Keep functions short")
    barrier = threading.Barrier(4)
    outcomes = []

    def approve(target, actor):
        try:
            barrier.wait()
            proposal_approve(tenant=tenant, actor=actor, proposal_id=target)
            outcomes.append((target, "approved"))
        except ConflictError:
            outcomes.append((target, "conflict"))
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(target, f"admin:a{n}"))
               for n, target in enumerate([proposal_id, proposal_id, other_id, other_id])]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == sorted(
        [(proposal_id, "approved"), (proposal_id, "conflict"), (other_id, "approved"), (other_id, "conflict")]
    )
    with tenant_context(tenant.id):
        assert sorted(AgentsDocumentVersion.objects.values_list("number", flat=True)) == [1, 2]
        latest = AgentsDocumentVersion.objects.order_by("-number").first().text
    assert "pnpm typecheck" in latest and "Keep functions short" in latest
    assert len(_events(tenant, "proposal_approved")) == 2


@pytest.mark.django_db
def test_a_tenant_admin_reviews_only_their_tenants_proposals(tenant, other_tenant, api_client, other_client):
    mine = _file(api_client)
    theirs = _file(other_client, reasoning="charlie-only reasoning")
    client = _admin_of(tenant)
    listing = client.get(ADMIN_URL).content.decode()
    assert f"{mine}/change/" in listing and f"{theirs}/change/" not in listing
    assert client.get(f"{ADMIN_URL}{theirs}/change/").status_code in (302, 404)
    assert client.post(f"{ADMIN_URL}{theirs}/approve/").status_code == 404
    with tenant_context(other_tenant.id):
        assert Proposal.objects.get(id=theirs).status == "pending"

    detail = client.get(f"{ADMIN_URL}{mine}/change/").content.decode()
    assert "CI failed twice on type errors." in detail and 'id="agents-diff"' in detail
    assert "+- 🤖 Added" in detail and "Approve" in detail
    approved = client.post(f"{ADMIN_URL}{mine}/approve/", follow=True).content.decode()
    assert "is now version 1" in approved
    again = client.post(f"{ADMIN_URL}{mine}/approve/", follow=True).content.decode()
    assert "already approved" in again
    assert "pnpm typecheck" in api_client.get("/api/v1/repositories/web/agents-md").content.decode()
    [event] = _events(tenant, "proposal_approved")
    assert event.actor == "admin:admin-acme"


@pytest.mark.django_db
def test_rejecting_in_the_admin_needs_a_note(tenant, api_client):
    proposal_id = _file(api_client)
    client = _admin_of(tenant)
    refused = client.post(f"{ADMIN_URL}{proposal_id}/reject/", {"note": ""}, follow=True).content.decode()
    assert "needs a note" in refused
    done = client.post(f"{ADMIN_URL}{proposal_id}/reject/", {"note": "Not our convention"}, follow=True)
    assert "Rejected" in done.content.decode()
    assert api_client.get(f"/api/v1/proposals/{proposal_id}").json()["status"] == "rejected"
    # The queue shows pending proposals by default; decided ones stay on record.
    assert f"{proposal_id}/change/" not in client.get(ADMIN_URL).content.decode()
    assert f"{proposal_id}/change/" in client.get(ADMIN_URL, {"status": "rejected"}).content.decode()


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_a_superuser_sees_every_tenants_proposals():
    mine = _file(client_for(make_token(make_tenant("alpha"), permissions=["proposals:write"]).raw))
    theirs = _file(client_for(make_token(make_tenant("bravo"), permissions=["proposals:write"]).raw))
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    listing = client.get(ADMIN_URL).content.decode()
    assert f"{mine}/change/" in listing and f"{theirs}/change/" in listing


@pytest.mark.django_db
def test_agents_md_can_be_imported_in_the_admin_with_a_lost_update_check(tenant, api_client):
    client = _admin_of(tenant)
    url = "/admin/proposals/agentsdocument/import/"
    created = client.post(url, {"repository": "web", "text": DOC}, follow=True).content.decode()
    assert "Web/AGENTS.md is at version 1." in created
    first_etag = api_client.get("/api/v1/repositories/web/agents-md")["ETag"]
    stale = client.post(url, {"repository": "web", "text": DOC + "- x\n"}).content.decode()
    assert "If-Match" in stale or "ETag" in stale
    client.post(url, {"repository": "web", "text": DOC + "- y\n", "etag": first_etag})
    assert api_client.get("/api/v1/repositories/web/agents-md").content.decode().endswith("- y\n")
    with tenant_context(tenant.id):
        assert [e.actor for e in AuditEvent.objects.filter(action="agents_md_imported")] == ["admin:admin-acme"] * 2


@pytest.mark.django_db
def test_the_review_queue_puts_pinning_memories_first_and_promotes_or_rejects(tenant, other_client, api_client):
    def write(**fields):
        return api_client.post("/api/v1/memories", fields, format="json").json()["id"]

    normal = write(scope="repository", repository="web", text="Normal repo lesson", kind="lesson")
    user_high = write(scope="user", user="u1", text="High user preference", priority="high", kind="preference")
    pinning = write(scope="repository", repository="web", text="Always run migrations", priority="high")
    wrong = write(scope="repository", repository="web", text="Wrong lesson about caching", kind="lesson")
    other_client.post("/api/v1/memories", {"scope": "repository", "repository": "web", "text": "charlie raw"},
                      format="json")  # fmt: skip
    client = _admin_of(tenant)
    url = "/admin/memories/reviewqueuememory/"
    page = client.get(url).content.decode()
    assert "charlie raw" not in page
    order = [page.index(f"{memory_id}/change/") for memory_id in (pinning, wrong, normal, user_high)]
    assert order == sorted(order)

    search = {"query": "run migrations", "repository": "web"}
    assert "unreviewed" in api_client.post("/api/v1/search", search, format="json").json()["context"]
    client.post(url, {"action": "promote_selected", "_selected_action": [pinning]})
    client.post(url, {"action": "reject_selected", "_selected_action": [wrong]})
    with tenant_context(tenant.id):
        assert Memory.objects.get(id=pinning).confidence == Confidence.VALIDATED
        assert not Memory.objects.filter(id=wrong).exists()
        [promote] = AuditEvent.objects.filter(action="promote")
        [delete] = AuditEvent.objects.filter(action="delete")
    assert promote.resource_ids == [pinning] and promote.actor == "admin:admin-acme"
    assert delete.resource_ids == [wrong] and delete.details["reason"] == "review"
    after = client.get(url).content.decode()
    assert f"{pinning}/change/" not in after and f"{normal}/change/" in after
    # Validated, the high-priority repository memory now pins, no longer marked unreviewed.
    found = api_client.post("/api/v1/search", search, format="json").json()
    assert found["items"][0]["id"] == pinning and found["items"][0]["confidence"] == "validated"
    assert "unreviewed" not in found["context"]
