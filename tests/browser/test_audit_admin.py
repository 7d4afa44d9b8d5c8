"""A tenant administrator inspects the audit trail in a real browser."""

import pytest
from django.contrib.auth.hashers import make_password

from tenants.models import User
from tests.browser.conftest import ARTIFACTS
from tests.conftest import client_for
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])


@pytest.fixture
def scene():
    """Data made before the browser starts (Playwright runs an event loop; the ORM refuses to run inside one)."""
    acme = make_tenant("acme")
    token = make_token(acme, name="claude-code").raw
    for text in ("Use pgbouncer", "Pin Node 22 in CI"):
        client_for(token).post("/api/v1/memories", {"scope": "repository", "repository": "r1", "text": text},
                               format="json")  # fmt: skip
    make_token(make_tenant("charlie"), name="charlie-agent")
    # Hashed with a hasher the live server (production settings) knows.
    password = make_password("a-Long-passw0rd", hasher="pbkdf2_sha256")
    User.objects.create(username="alice", password=password, is_staff=True, tenant=acme)


def test_it_logs_in_filters_the_audit_list_and_opens_an_event(live_server_url, scene, browser_page):
    page = browser_page
    page.goto(f"{live_server_url}/admin/login/?next=/admin/audit/auditevent/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a-Long-passw0rd")
    page.click("input[type=submit]")
    page.wait_for_selector("#result_list")
    assert "charlie" not in page.content()

    page.click("#changelist-filter a:text-is('Offload')")
    page.wait_for_url("**action__exact=offload**")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    assert page.locator("#result_list td.field-action").all_inner_texts() == ["Offload", "Offload"]
    page.screenshot(path=str(ARTIFACTS / "audit-list-filtered.png"), full_page=True)

    rows.first.locator("th a").click()
    page.wait_for_selector("div.field-hash")
    detail = page.content()
    assert "token:" in detail and ":claude-code" in detail and "Use pgbouncer" not in detail
    page.screenshot(path=str(ARTIFACTS / "audit-event-detail.png"), full_page=True)
