"""Regression tests for what the fuzzers found, one per finding."""

import json

import pytest

from memory_service.memories.models import Memory
from proposals.models import AgentsDocumentVersion
from tenants.context import tenant_context
from tests.fuzz.test_isolation import mcp_call
from tests.fuzz.test_schema import _served_document

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/proposals", {"repository": "web", "section": "## A", "addition": "x", "reasoning": 0}, "reasoning"),
        ("/api/v1/memories", {"scope": "user", "user": 7, "text": "t"}, "user"),
        ("/api/v1/memories", {"scope": "user", "user": "u1", "text": "t", "tags": [1]}, "tags"),
        ("/api/v1/search", {"query": "q", "user": "u1", "top": "5"}, "top"),
        ("/api/v1/tokens", {"name": "ci", "permissions": ["memory:read"], "user": 5}, "user"),
    ],
)
def test_it_refuses_a_value_of_another_json_type_instead_of_coercing_it(api_client, url, body, field):
    response = api_client.post(url, body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {field: ["Wrong type."]}


def test_it_refuses_an_integer_as_a_memory_id_to_supersede(api_client, tenant):
    memory = api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": "old"}, format="json").json()
    response = api_client.post(f"/api/v1/memories/{memory['id']}/supersede", {"by": 12345}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["fields"]) == {"by"}
    with tenant_context(tenant.id):
        assert not Memory.objects.get(id=memory["id"]).superseded_by_links.exists()


def test_it_reads_an_empty_limit_as_not_given_like_every_other_filter(api_client):
    api_client.post("/api/v1/memories", {"scope": "user", "user": "u1", "text": "kept"}, format="json")
    response = api_client.get("/api/v1/memories?limit=&kind=")
    assert response.status_code == 200
    assert [m["text"] for m in response.json()["results"]] == ["kept"]


def test_it_does_not_take_a_json_string_body_as_an_agents_md_document(api_client, tenant):
    url = "/api/v1/repositories/web/agents-md"
    response = api_client.put(url, data=json.dumps("# Injected"), content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["fields"] == {"text": ["Required."]}
    with tenant_context(tenant.id):
        assert not AgentsDocumentVersion.objects.exists()
    assert api_client.put(url, {"text": "# AGENTS.md\n"}, format="json").status_code == 201


def test_the_schema_names_each_views_input_apart_and_documents_lists_and_errors():
    document = _served_document()
    components = document["components"]["schemas"]
    assert {"SearchInputRequest", "SessionNoteInputRequest", "ProposalListInputRequest"} <= set(components)
    assert "InputRequest" not in components
    assert components["SearchInputRequest"]["additionalProperties"] is False
    memories = document["paths"]["/api/v1/memories"]
    listed = memories["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert set(components[listed["$ref"].rsplit("/", 1)[1]]["required"]) == {"results", "next"}
    assert {"201", "200", "400", "401", "403", "409", "413", "429"} <= set(memories["post"]["responses"])
    error = memories["post"]["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    assert error == "#/components/schemas/Error"
    agents_md = document["paths"]["/api/v1/repositories/{repository}/agents-md"]["put"]["responses"]
    assert {"412", "428"} <= set(agents_md)


def test_it_refuses_a_nul_character_in_a_markdown_import_with_400(api_client, tenant):
    response = api_client.put(
        "/api/v1/repositories/web/agents-md", data=b"# AGENTS\x00.md\n", content_type="text/markdown"
    )
    assert response.status_code == 400 and response.json()["error"]["fields"] == {
        "text": ["NUL characters are not allowed."]
    }
    with tenant_context(tenant.id):
        assert not AgentsDocumentVersion.objects.exists()


def test_it_refuses_a_nul_character_in_a_metadata_value_with_400(api_client, tenant):
    body = {"scope": "user", "user": "u1", "text": "deploy notes", "metadata": {"ticket": "OPS\x00-1"}}
    response = api_client.post("/api/v1/memories", body, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["fields"]) == {"metadata"}
    assert "OPS" not in response.content.decode()
    with tenant_context(tenant.id):
        assert not Memory.objects.exists()


@pytest.mark.django_db(transaction=True, databases=["default", "admin"])
def test_an_mcp_note_with_a_nul_character_is_a_tool_error_not_a_crash(token, tenant):
    is_error, message = mcp_call(token, "add_note", {"text": "restart\x00 workers", "repository": "r1"})
    assert is_error is True and "NUL" in message
    with tenant_context(tenant.id):
        assert not Memory.objects.exists()


def test_it_answers_404_for_a_token_prefix_with_a_nul_character(api_client):
    assert api_client.post("/api/v1/tokens/ab%00cd/revoke").status_code == 404


def test_it_answers_401_for_a_bearer_token_with_a_nul_character(tenant):
    from tests.conftest import client_for

    assert client_for("ab\x00cd.secret").get("/api/v1/memories").status_code == 401


@pytest.mark.parametrize(
    ("url", "body", "field", "limit"),
    [
        ("/api/v1/tokens", {"name": " " + "n" * 50, "permissions": ["memory:read"]}, "name", 50),
        ("/api/v1/memories", {"scope": "user", "user": "u1", "text": "t", "title": "\u0085" + "t" * 512}, "title", 512),
        ("/api/v1/memories", {"scope": "user", "user": "u1", "text": "t", "tags": ["x" * 64 + " "]}, "tags", 64),
        ("/api/v1/proposals", {"repository": "web", "section": " " + "s" * 200, "addition": "x", "reasoning": "r"},
         "section", 200),
    ],
)  # fmt: skip
def test_a_limit_bounds_the_value_as_sent_before_whitespace_is_trimmed(api_client, url, body, field, limit):
    """The schema says ``maxLength``; DRF trimmed first, so one space over the limit passed (ST201)."""
    response = api_client.post(url, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    document = _served_document()
    assert json.dumps(document).count(f'"maxLength": {limit}') >= 1
