"""The admin login throttles password guessing per username and client address (django-axes)."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from tenants.models import User
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

LOGIN_URL = "/admin/login/"
PASSWORD = "a-Long-passw0rd"
ATTACKER = "198.51.100.23"


@pytest.fixture
def admins():
    tenant = make_tenant("acme")
    for username in ("alice", "bob"):
        User.objects.create_user(username, password=PASSWORD, is_staff=True, tenant=tenant)


def log_in(client: Client, username: str, password: str, address: str = "127.0.0.1"):
    return client.post(LOGIN_URL, {"username": username, "password": password, "next": "/admin/"},
                       REMOTE_ADDR=address)  # fmt: skip


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_it_refuses_the_right_password_after_too_many_wrong_ones(admins, caplog):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        assert log_in(client, "alice", "guess", ATTACKER).status_code in (200, 429)
    refused = log_in(client, "alice", PASSWORD, ATTACKER)
    assert refused.status_code == 429 and not logged_in(client)
    assert "Locking out" in caplog.text and "alice" not in caplog.text and ATTACKER not in caplog.text


def test_it_locks_out_only_that_username_from_that_address(admins):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(Client(), "alice", "guess", ATTACKER)

    bob = Client()
    assert log_in(bob, "bob", PASSWORD, ATTACKER).status_code == 302 and logged_in(bob)
    alice_elsewhere = Client()
    assert log_in(alice_elsewhere, "alice", PASSWORD).status_code == 302 and logged_in(alice_elsewhere)


def test_it_lets_the_user_in_again_after_the_cool_off(admins):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        log_in(Client(), "alice", "guess", ATTACKER)
    assert log_in(Client(), "alice", PASSWORD, ATTACKER).status_code == 429

    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - settings.AXES_COOLOFF_TIME
                                 - timedelta(seconds=1))  # fmt: skip
    client = Client()
    assert log_in(client, "alice", PASSWORD, ATTACKER).status_code == 302 and logged_in(client)


def test_it_counts_only_failures_in_a_row(admins):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(Client(), "alice", "guess", ATTACKER)
    assert log_in(Client(), "alice", PASSWORD, ATTACKER).status_code == 302  # resets the count
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(Client(), "alice", "guess", ATTACKER)
    assert log_in(Client(), "alice", PASSWORD, ATTACKER).status_code == 302
