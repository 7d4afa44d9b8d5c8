"""``make run`` names the address it serves on as PUBLIC_BASE_URL, unless the operator set one."""

from dev import stack as devstack

SECRETS = {"secret_key": "s", "audit_key": "a", "pii_key": "p"}
URLS = ("postgres://app@127.0.0.1:1/db", "postgres://owner@127.0.0.1:1/db", "redis://127.0.0.1:2/0")


def test_it_derives_public_base_url_from_the_port(monkeypatch):
    monkeypatch.delenv("PUBLIC_BASE_URL", raising=False)
    written = devstack.run_settings(SECRETS, *URLS, port=8123)
    assert written["PORT"] == "8123"
    assert written["PUBLIC_BASE_URL"] == "http://127.0.0.1:8123"


def test_it_keeps_a_public_base_url_set_in_the_environment(monkeypatch):
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://memory.example.com")
    assert devstack.run_settings(SECRETS, *URLS, port=8123)["PUBLIC_BASE_URL"] == "https://memory.example.com"
