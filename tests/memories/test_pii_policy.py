"""Tenant PII policies: labels or keyed pseudonyms, entity subsets, and refusing a missing tier."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenants.context import tenant_context
from tenants.masking import tenant_pii_policy_set
from tenants.models import default_pii_mode
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db


def _write(client, text):
    return client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": text}, format="json")


def test_it_pseudonymises_per_tenant_and_matches_queries(tenant, other_tenant, api_client, other_client):
    tenant_pii_policy_set(tenant=tenant, mode="pseudonym")
    tenant_pii_policy_set(tenant=other_tenant, mode="pseudonym")
    mine = _write(api_client, "Escalate to ops-lead@example.com").json()["text"]
    theirs = _write(other_client, "Escalate to ops-lead@example.com").json()["text"]
    assert mine.startswith("Escalate to <EMAIL_ADDRESS_") and len(mine.split("_")[-1].rstrip(">")) == 12
    assert mine != theirs  # keyed per tenant
    found = api_client.post("/api/v1/search", {"query": "ops-lead@example.com", "user": "u1"}, format="json").json()
    assert [i["text"] for i in found["items"]] == [mine]


def test_it_masks_only_the_chosen_entities_and_always_secrets(tenant, api_client):
    tenant_pii_policy_set(tenant=tenant, entities=["EMAIL_ADDRESS"])
    body = _write(api_client, "mail a@example.com call 090-1234-5678 key ghp_" + "a" * 36).json()
    assert body["pii"] == {"EMAIL_ADDRESS": 1, "SECRET": 1}
    assert "090-1234-5678" in body["text"]


@pytest.fixture
def without_name_tier(monkeypatch):
    """This process's masker as one built where the name tier's packages are not installed."""
    from memory_service.pii import Masker

    monkeypatch.setattr("memory_service.pii.engine._masker", Masker())


def test_the_default_policy_masks_names_with_pseudonyms(tenant, api_client):
    body = _write(api_client, "Per Priya Raman, keep the pool at 20; 田中さんも同意。").json()
    assert tenant.pii_mode == "pseudonym"
    assert re.fullmatch(
        r"Per <PERSON_[0-9a-f]{12}>, keep the pool at 20; <PERSON_[0-9a-f]{12}>さんも同意。", body["text"]
    )
    assert body["pii"] == {"PERSON": 2}
    again = _write(api_client, "Priya Raman agreed.").json()
    assert again["text"].split(" ")[0] == body["text"].split(" ")[1].rstrip(",")  # the same name, the same pseudonym


def test_new_tenants_get_labels_when_no_pseudonym_key_is_configured(settings):
    settings.PII_PSEUDONYM_KEYS = ""
    assert make_tenant().pii_mode == "label" and default_pii_mode() == "label"
    settings.PII_PSEUDONYM_KEYS = "1:k"
    assert make_tenant().pii_mode == "pseudonym"


def test_a_policy_may_require_the_name_tier_where_it_is_loaded(tenant):
    tenant_pii_policy_set(tenant=tenant, require_ner=True)
    with tenant_context(tenant.id):
        tenant.refresh_from_db()
    assert tenant.pii_require_ner is True


def test_it_refuses_a_policy_that_needs_a_missing_tier(tenant, without_name_tier):
    from tenants.masking import PiiTierMissingError

    with pytest.raises(PiiTierMissingError):
        tenant_pii_policy_set(tenant=tenant, require_ner=True)
    with tenant_context(tenant.id):
        tenant.refresh_from_db()
    assert tenant.pii_require_ner is False


def test_it_refuses_writes_when_a_stored_policy_needs_a_missing_tier(tenant, api_client, without_name_tier):
    from tenants.models import Tenant

    with tenant_context(tenant.id):
        Tenant.objects.filter(id=tenant.id).update(pii_require_ner=True)
    response = _write(api_client, "a note with a name in it")
    assert response.status_code == 503 and response.json()["error"]["code"] == "pii_tier_unavailable"
    assert api_client.get("/api/v1/memories").json()["results"] == []


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_it_sets_the_policy_from_the_command_line(without_name_tier):
    make_token(make_tenant("acme"))
    out = StringIO()
    call_command(
        "set_pii_policy", "acme", "--mode", "pseudonym", "--entities", "EMAIL_ADDRESS,PHONE_NUMBER", stdout=out
    )
    assert "mode pseudonym; entities EMAIL_ADDRESS, PHONE_NUMBER" in out.getvalue()
    with pytest.raises(CommandError, match="Unknown entity"):
        call_command("set_pii_policy", "acme", "--entities", "SHOE_SIZE", stdout=StringIO())
    with pytest.raises(CommandError, match="tier"):
        call_command("set_pii_policy", "acme", "--require-ner", stdout=StringIO())
