from datetime import timedelta

import pytest
from django.utils import timezone

from tenants.context import tenant_context
from tenants.models import ApiToken
from tenants.services import tenant_deactivate, token_revoke
from tests.conftest import client_for
from tests.factories import make_token

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


def _assert_401(response):
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "not_authenticated", "message": "A valid bearer token is required.", "fields": {}}
    }
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_answers_401_without_a_token(anonymous_client):
    _assert_401(anonymous_client.get(URL))


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer nonsense", "Bearer a.b.c", "Bearer abc.def extra", "Basic dXNlcjpwYXNz", "Bearer " + "x" * 300],
)
def test_it_answers_401_for_a_malformed_or_unknown_token(anonymous_client, tenant, header):
    response = anonymous_client.get(URL, HTTP_AUTHORIZATION=header)
    _assert_401(response)


def test_it_answers_401_for_a_right_prefix_with_a_wrong_secret(tenant):
    raw = make_token(tenant).raw
    prefix = raw.split(".")[0]
    _assert_401(client_for(f"{prefix}.{'A' * 32}").get(URL))


def test_it_answers_401_for_a_revoked_token(tenant):
    issued = make_token(tenant)
    token_revoke(tenant=tenant, actor="system:tests", token=issued.token)
    _assert_401(client_for(issued.raw).get(URL))


def test_it_answers_401_for_an_expired_token(tenant):
    issued = make_token(tenant, expires_at=timezone.now() + timedelta(seconds=30))
    with tenant_context(tenant.id):
        ApiToken.objects.filter(pk=issued.token.pk).update(expiry_date=timezone.now() - timedelta(seconds=1))
    _assert_401(client_for(issued.raw).get(URL))


def test_it_answers_401_when_the_tenant_is_deactivated(tenant):
    issued = make_token(tenant)
    tenant_deactivate(tenant=tenant)
    _assert_401(client_for(issued.raw).get(URL))


def test_it_accepts_a_valid_token_and_records_its_use(tenant):
    issued = make_token(tenant)
    assert issued.token.last_used_at is None
    response = client_for(issued.raw).get(URL)
    assert response.status_code == 200
    assert response.json() == {"results": [], "next": None}
    with tenant_context(tenant.id):
        assert ApiToken.objects.get(pk=issued.token.pk).last_used_at is not None


def test_it_stores_only_a_hash_of_the_token(tenant):
    issued = make_token(tenant)
    secret = issued.raw.split(".", 1)[1]
    with tenant_context(tenant.id):
        stored = ApiToken.objects.get(pk=issued.token.pk)
    assert secret not in stored.hashed_key and secret not in stored.id
    assert issued.raw.startswith(stored.prefix + ".")


def test_it_answers_403_naming_the_missing_permission(tenant):
    reader = make_token(tenant, permissions=["memory:read"]).raw
    response = client_for(reader).get("/api/v1/tokens")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert "'admin'" in response.json()["error"]["message"]


def test_it_gives_new_tokens_read_and_write_only_by_default(tenant):
    assert sorted(make_token(tenant).token.permissions) == ["memory:read", "memory:write"]
