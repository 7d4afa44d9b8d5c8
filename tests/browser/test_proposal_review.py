"""A tenant administrator reviews an agent's AGENTS.md proposal in a real browser."""

import pytest
from django.contrib.auth.hashers import make_password

from tenants.models import User
from tests.browser.conftest import ARTIFACTS
from tests.conftest import client_for
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

DOC = "# AGENTS.md\n\n## Boundaries\n\n### Always\n- Read existing patterns first\n\n### Never\n- Commit secrets\n"


@pytest.fixture
def scene():
    """Data made before the browser starts (Playwright runs an event loop; the ORM refuses to run inside one)."""
    acme = make_tenant("acme")
    token = make_token(acme, name="claude-code", permissions=["memory:read", "proposals:write", "admin"]).raw
    client = client_for(token)
    client.put("/api/v1/repositories/web/agents-md", data=DOC.encode(), content_type="text/markdown")
    proposal = client.post("/api/v1/proposals", {
        "repository": "web", "section": "### Always", "addition": "Run `pnpm typecheck` after editing TS files",
        "reasoning": "Type errors reached CI twice this week.",
    }, format="json").json()  # fmt: skip
    charlie = make_token(make_tenant("charlie"), name="charlie-agent", permissions=["proposals:write"]).raw
    client_for(charlie).post("/api/v1/proposals", {
        "repository": "web", "section": "Never", "addition": "charlie-only rule", "reasoning": "charlie",
    }, format="json")  # fmt: skip
    password = make_password("a-Long-passw0rd", hasher="pbkdf2_sha256")
    User.objects.create(username="alice", password=password, is_staff=True, tenant=acme)
    return token, proposal["id"]


def test_a_tenant_admin_approves_a_proposal_after_reading_the_diff(live_server_url, scene, browser_page):
    token, proposal_id = scene
    page = browser_page
    page.goto(f"{live_server_url}/admin/login/?next=/admin/proposals/proposal/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a-Long-passw0rd")
    page.click("input[type=submit]")
    page.wait_for_selector("#result_list")
    assert "charlie-only rule" not in page.content()
    assert page.locator("#result_list tbody tr").count() == 1
    page.screenshot(path=str(ARTIFACTS / "proposal-queue.png"), full_page=True)

    page.click(f"#result_list a[href*='{proposal_id}']")
    page.wait_for_selector("#agents-diff")
    added = page.locator("#agents-diff .add").all_inner_texts()
    assert len(added) == 1 and added[0].startswith("+- 🤖 Added ") and "pnpm typecheck" in added[0]
    assert "Type errors reached CI twice this week." in page.content()
    page.screenshot(path=str(ARTIFACTS / "proposal-diff.png"), full_page=True)

    page.click("#approve-button")
    page.wait_for_selector(".messagelist .success")
    assert "is now version 2" in page.locator(".messagelist").inner_text()
    assert page.locator("#approve-button").count() == 0
    page.screenshot(path=str(ARTIFACTS / "proposal-approved.png"), full_page=True)

    response = page.request.get(f"{live_server_url}/api/v1/repositories/web/agents-md",
                                headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status == 200 and response.headers["x-agentsmd-version"] == "2"
    assert "- 🤖 Added " in response.text() and "Run `pnpm typecheck` after editing TS files" in response.text()
    assert response.text().index("pnpm typecheck") < response.text().index("### Never")
