from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture
def browser_page():
    """A headless Debian Chromium page driven by Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update"],
        )  # fmt: skip
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(15_000)
        try:
            yield page
        finally:
            browser.close()
