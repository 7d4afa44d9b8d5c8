"""Every admin page, opened in a real browser by a platform operator and by a tenant administrator:
each is saved as a screenshot (``tests/artifacts/admin/``) and checked for what a person reads
there (wording, columns that fit, rows on one line)."""

import pytest
from django.contrib import admin
from django.contrib.auth.hashers import make_password

from memory_service.exports.models import ExportJob, ExportStatus
from memory_service.exports.services import export_job_start
from tenants.admin_site import TenantScopedAdmin
from tenants.context import tenant_context
from tenants.models import User
from tests.browser.conftest import ARTIFACTS
from tests.conftest import ALL_PERMISSIONS, client_for
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

SHOTS = ARTIFACTS / "admin"
PASSWORD = "a-Long-passw0rd"
DOC = "# AGENTS.md\n\n## Boundaries\n\n### Always\n- Read existing patterns first\n\n### Never\n- Commit secrets\n"
LONG_TEXT = (
    "When the nightly import job times out, check the connection pool first: the worker opens one "
    "connection per batch and the pool's limit is shared with the web processes, so a long import "
    "starves the API of connections and every request waits for the pool timeout."
)


def _write(client, **fields) -> str:
    body = {"scope": "repository", "repository": "web", "kind": "note"} | fields
    return client.post("/api/v1/memories", body, format="json").json()["id"]


@pytest.fixture
def scene():
    """Data made before the browser starts (Playwright runs an event loop; the ORM refuses to run
    inside one): a tenant with memories of every category, a proposal, an AGENTS.md, export jobs
    in every state; another tenant; a platform operator and a tenant administrator."""
    acme = make_tenant("acme")
    client = client_for(make_token(acme, name="claude-code", permissions=ALL_PERMISSIONS).raw)
    ids = {
        "pinning": _write(client, text="Always run migrations before deploying", priority="high", kind="lesson"),
        "lesson": _write(client, text=LONG_TEXT, kind="lesson", title="Import timeouts"),
        "decision": _write(client, text="We use pnpm, not npm", kind="decision"),
        "note": _write(client, scope="user", user="u1", text="Answer in French", kind="preference"),
    }
    client.put("/api/v1/sessions/s1/notes/plan", {"text": "1. fix the login page", "user": "u1"}, format="json")
    items = [{"scope": "user", "user": "u1", "kind": "preference", "text": f"Imported preference {n}"}
             for n in range(5)]  # fmt: skip
    client.post("/api/v1/memories/bulk", {"items": items}, format="json")
    client.put("/api/v1/repositories/web/agents-md", data=DOC.encode(), content_type="text/markdown")
    ids["proposal"] = client.post("/api/v1/proposals", {
        "repository": "web", "section": "### Always", "addition": "Run `pnpm typecheck` after editing TS files",
        "reasoning": "Type errors reached CI twice this week.",
    }, format="json").json()["id"]  # fmt: skip
    client.post("/api/v1/search", {"query": "migrations", "repository": "web"}, format="json")
    jobs = {status: export_job_start(tenant=acme, actor="system:tests", user="u1", enqueue=False) for status in
            (ExportStatus.RUNNING, ExportStatus.SUCCEEDED, ExportStatus.EXPIRED, ExportStatus.ERASED)}  # fmt: skip
    with tenant_context(acme.id):
        for status, job in jobs.items():
            progress = 40 if status == ExportStatus.RUNNING else 100
            ExportJob.objects.filter(id=job.id).update(status=status, progress=progress)
    charlie = client_for(make_token(make_tenant("charlie"), name="charlie-agent").raw)
    _write(charlie, text="charlie's own lesson", kind="lesson", priority="high")
    password = make_password(PASSWORD, hasher="pbkdf2_sha256")  # a hasher the live server knows
    User.objects.create(username="root", password=password, is_staff=True, is_superuser=True)
    User.objects.create(username="alice", password=password, is_staff=True, tenant=acme)
    changelists = sorted(
        (f"/admin/{model._meta.app_label}/{model._meta.model_name}/", isinstance(model_admin, TenantScopedAdmin))
        for model, model_admin in admin.site._registry.items()
    )
    return ids, changelists


def _log_in(page, url, username):
    page.goto(f"{url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#content-main")


def _shoot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _fits(page) -> bool:
    """The result table fits its box and the window: no column is cut off or scrolled out of view."""
    return page.evaluate(
        "() => { const box = document.querySelector('#changelist .results');"
        " return box.scrollWidth <= box.clientWidth && box.getBoundingClientRect().right <= window.innerWidth; }"
    )


def _tallest_row(page) -> float:
    return page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('#result_list tbody tr')]"
        ".map(row => row.getBoundingClientRect().height))"
    )


def test_every_admin_page_reads_plainly_for_a_platform_operator(live_server_url, scene, browser_page):
    ids, changelists = scene
    page = browser_page
    print(f"admin screenshots in {SHOTS}")
    _log_in(page, live_server_url, "root")
    assert page.locator("a:text-is('View site')").count() == 0
    _shoot(page, "index")
    for url, ours in changelists:
        page.goto(f"{live_server_url}{url}")
        page.wait_for_selector("#content-main")
        content = page.inner_text("#content")
        assert "(s)" not in content and "(ies)" not in content, url
        assert not (ours and content.startswith("Select ")), url  # titled by what they list
        _shoot(page, url.strip("/").replace("/", "-"))
        if page.locator("#result_list").count():
            assert _fits(page), url

    details = {
        "memory-detail": f"/admin/memories/memory/{ids['lesson']}/change/",
        "review-queue-detail": f"/admin/memories/reviewqueuememory/{ids['pinning']}/change/",
        "proposal-detail": f"/admin/proposals/proposal/{ids['proposal']}/change/",
    }
    for name, url in details.items():
        page.goto(f"{live_server_url}{url}")
        page.wait_for_selector("#content-main")
        _shoot(page, name)
    page.goto(f"{live_server_url}/admin/audit/auditevent/")
    assert _tallest_row(page) < 40  # one line per event, whatever its ids
    page.locator("#result_list tbody tr th a").first.click()
    page.wait_for_selector("div.field-hash")
    _shoot(page, "audit-event-detail")
    page.goto(f"{live_server_url}/admin/exports/exportjob/")
    progress = page.locator("#result_list td.field-progress_bar").all_inner_texts()
    assert sorted(text.strip() for text in progress) == ["100%", "40%", "—", "—"]


def test_a_tenant_admin_reads_the_review_queue(live_server_url, scene, browser_page):
    ids, _changelists = scene
    page = browser_page
    _log_in(page, live_server_url, "alice")
    page.goto(f"{live_server_url}/admin/memories/reviewqueuememory/")
    page.wait_for_selector("#result_list")
    assert page.inner_text("#content h1") == "Review queue"
    assert page.title().startswith("Review queue |")
    assert "4 memories awaiting review" in page.inner_text("#content")
    filters = page.locator("#changelist-filter").inner_text()
    for label in ("Needs review (4)", "Session notes (1)", "Bulk writes (5)", "All raw memories (10)"):
        assert label in filters
    assert "charlie" not in page.content()
    links = page.locator("#result_list tbody tr th a").evaluate_all("links => links.map(a => a.href)")
    assert [link.split("/")[-3] for link in links] == [ids["pinning"], ids["decision"], ids["lesson"], ids["note"]]
    headers = page.locator("#result_list thead th").all_inner_texts()
    assert [h.strip().upper() for h in headers if h.strip()][-2:] == ["PRIORITY", "ORIGIN"]
    _shoot(page, "review-queue-tenant-admin")
    assert _fits(page)
    text_width = page.locator("#result_list td.field-excerpt").first.bounding_box()["width"]
    assert text_width >= 300

    page.click("#changelist-filter a:has-text('Bulk writes')")
    page.wait_for_url("**show=bulk**")
    assert page.locator("#result_list tbody tr").count() == 5
    _shoot(page, "review-queue-bulk-writes")

    page.goto(f"{live_server_url}/admin/memories/reviewqueuememory/")
    page.check(f"#result_list input[value='{ids['note']}']")
    page.check(f"#result_list input[value='{ids['decision']}']")
    page.select_option("select[name=action]", "promote_selected")
    page.click("button[name=index]")
    page.wait_for_selector("ul.messagelist")
    assert "Promoted 2 memories to validated." in page.inner_text("ul.messagelist")
    _shoot(page, "review-queue-promoted")
