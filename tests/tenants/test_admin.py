"""Tenant administrators see only their tenant in the admin, through RLS; superusers see all."""

import pytest
from django.test import Client

from tenants.models import User
from tests.conftest import client_for
from tests.factories import make_tenant, make_token

TOKENS_URL = "/admin/tenants/apitoken/"


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def two_tenants(db):
    alpha, bravo = make_tenant("alpha"), make_tenant("bravo")
    return {
        "alpha": (alpha, make_token(alpha, name="alpha-agent")),
        "bravo": (bravo, make_token(bravo, name="bravo-agent")),
    }


@pytest.mark.django_db
def test_it_shows_a_tenant_admin_only_their_tenant(two_tenants):
    alpha, _ = two_tenants["alpha"]
    client = _login(User.objects.create_user("alice", password="x", is_staff=True, tenant=alpha))

    tokens_page = client.get(TOKENS_URL).content.decode()
    assert "alpha-agent" in tokens_page and "bravo-agent" not in tokens_page
    tenants_page = client.get("/admin/tenants/tenant/").content.decode()
    assert "alpha" in tenants_page and "bravo" not in tenants_page
    # The tenant filter's choices come from the same RLS-scoped queries.
    assert "bravo" not in client.get(TOKENS_URL, {"tenant__id__exact": "x"}).content.decode()


@pytest.mark.django_db
def test_it_hides_another_tenants_object_from_a_tenant_admin(two_tenants):
    alpha, _ = two_tenants["alpha"]
    _, bravo_token = two_tenants["bravo"]
    client = _login(User.objects.create_user("alice", password="x", is_staff=True, tenant=alpha))
    response = client.get(f"{TOKENS_URL}{bravo_token.token.pk}/change/", follow=True)
    assert "bravo-agent" not in response.content.decode()
    assert "doesn’t exist" in response.content.decode()


@pytest.mark.django_db
def test_it_lets_a_tenant_admin_revoke_their_tokens_only(two_tenants):
    alpha, alpha_token = two_tenants["alpha"]
    _, bravo_token = two_tenants["bravo"]
    client = _login(User.objects.create_user("alice", password="x", is_staff=True, tenant=alpha))
    response = client.post(
        TOKENS_URL,
        {"action": "revoke_tokens", "_selected_action": [alpha_token.token.pk, bravo_token.token.pk]},
    )
    assert response.status_code == 302
    assert client_for(alpha_token.raw).get("/api/v1/memories").status_code == 401
    assert client_for(bravo_token.raw).get("/api/v1/memories").status_code == 200


@pytest.mark.django_db
def test_it_keeps_staff_without_a_tenant_out(two_tenants):
    client = _login(User.objects.create_user("drifter", password="x", is_staff=True))
    response = client.get(TOKENS_URL)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_shows_a_superuser_every_tenant():
    for slug in ("alpha", "bravo"):
        make_token(make_tenant(slug), name=f"{slug}-agent")
    client = _login(User.objects.create_superuser("root", password="x"))
    page = client.get(TOKENS_URL).content.decode()
    assert "alpha-agent" in page and "bravo-agent" in page


@pytest.mark.django_db
def test_it_never_lets_anyone_add_or_delete_tokens_in_the_admin(two_tenants):
    alpha, alpha_token = two_tenants["alpha"]
    client = _login(User.objects.create_user("alice", password="x", is_staff=True, tenant=alpha))
    assert client.get(f"{TOKENS_URL}add/").status_code == 403
    assert client.get(f"{TOKENS_URL}{alpha_token.token.pk}/delete/").status_code == 403


@pytest.mark.django_db
def test_it_shows_memories_read_only_and_only_the_tenants(two_tenants):
    from memory_service.memories.services import memory_create
    from tenants.access import Principal
    from tenants.context import tenant_context

    alpha, alpha_token = two_tenants["alpha"]
    bravo, bravo_token = two_tenants["bravo"]
    for token, text in ((alpha_token.token, "alpha remembers the pool size"), (bravo_token.token, "bravo secret")):
        with tenant_context(token.tenant_id):
            memory_create(principal=Principal.from_token(token), scope="repository", repository="r1", text=text)
    client = _login(User.objects.create_user("alice", password="x", is_staff=True, tenant=alpha))
    page = client.get("/admin/memories/memory/").content.decode()
    assert "alpha remembers the pool size" in page and "bravo secret" not in page
    assert client.get("/admin/memories/memory/add/").status_code == 403
