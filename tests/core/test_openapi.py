"""The OpenAPI document as tool builders import it: valid OpenAPI 3, served at /openapi.json too,
naming its server, every operation named, summarised and described for whoever wires an agent,
no docstring of ours in it, and agent operations tagged apart from admin ones."""

import inspect
import json
import re
from types import SimpleNamespace

import pytest
from drf_spectacular.generators import EndpointEnumerator
from openapi_spec_validator import validate
from rest_framework import serializers

from memory_service.schema import ADMIN, AGENT
from tenants.models import Permission

pytestmark = pytest.mark.django_db

METHODS = {"get", "put", "post", "patch", "delete"}
OUR_PACKAGES = ("memory_service.", "tenants.", "audit.", "proposals.")
# ChatGPT Actions reads at most this many characters of an operation's description.
MAX_DESCRIPTION_CHARS = 300


@pytest.fixture
def document(anonymous_client) -> dict:
    response = anonymous_client.get("/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    return json.loads(response.content)


def operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def descriptions(node):
    """Every ``description`` string anywhere in a piece of the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                yield value
            else:
                yield from descriptions(value)
    elif isinstance(node, list):
        for value in node:
            yield from descriptions(value)


def our_docstrings() -> set[str]:
    """The first line of every docstring of our serializers (and their methods) and API views."""

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    owners = [cls for cls in subclasses(serializers.BaseSerializer) if cls.__module__.startswith(OUR_PACKAGES)]
    owners += [endpoint[3].cls for endpoint in EndpointEnumerator().get_api_endpoints()]
    lines = set()
    for owner in owners:
        for documented in [owner, *(f for f in vars(owner).values() if inspect.isfunction(f))]:
            doc = vars(owner).get("__doc__") if documented is owner else documented.__doc__
            if doc and doc.strip():
                lines.add(inspect.cleandoc(doc).splitlines()[0])
    return lines


def test_it_validates_as_openapi_3(document):
    validate(document)  # raises on the first violation of the OpenAPI 3 specification
    assert document["openapi"].startswith("3.")


def test_it_serves_openapi_json_as_the_same_document_as_api_schema(anonymous_client, document):
    schema = anonymous_client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    assert json.loads(schema.content) == document


def test_it_names_public_base_url_as_its_server(anonymous_client, settings):
    settings.PUBLIC_BASE_URL = "https://memory.example.com/"
    served = anonymous_client.get("/openapi.json").json()
    assert served["servers"][0]["url"] == "https://memory.example.com"
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:8123"
    assert anonymous_client.get("/openapi.json").json()["servers"] == [{"url": "http://127.0.0.1:8123"}]


def test_it_gives_every_operation_a_unique_camel_case_id_a_summary_and_a_description(document):
    ids = []
    for path, method, operation in operations(document):
        where = f"{method.upper()} {path}"
        assert re.fullmatch(r"[a-z]+(?:[A-Z][a-z0-9]*)+", operation.get("operationId", "")), where
        ids.append(operation["operationId"])
        assert operation.get("summary", "").strip(), where
        assert operation.get("description", "").strip(), where
        assert len(operation["description"]) <= MAX_DESCRIPTION_CHARS, where
        assert all(response["description"].strip() for response in operation["responses"].values()), where
    assert len(ids) == len(set(ids)) and len(ids) >= 26
    by_route = {(path, method): op["operationId"] for path, method, op in operations(document)}
    assert by_route[("/api/v1/search", "post")] == "searchMemories"
    assert by_route[("/api/v1/memories", "get")] == "listMemories"
    assert by_route[("/api/v1/memories", "post")] == "createMemory"
    assert by_route[("/api/v1/memories/bulk", "post")] == "bulkCreateMemories"
    assert by_route[("/api/v1/memories/{memory_id}", "get")] == "getMemory"


def test_it_describes_search_for_whoever_wires_an_agent(document):
    search = document["paths"]["/api/v1/search"]["post"]
    assert "before acting" in search["description"]
    assert "memory:read" in search["description"]
    output = document["components"]["schemas"]["SearchOutput"]["properties"]
    assert all(output[name].get("description") for name in ("items", "context", "degraded"))


def test_it_keeps_our_docstrings_out_of_the_document(document):
    docstrings = our_docstrings()
    # The docstring that used to leak into ten components is among those checked.
    assert any(line.startswith("Refuses fields it does not know") for line in docstrings)
    described = list(descriptions(document["paths"])) + list(descriptions(document["components"]))
    leaked = {line for line in docstrings for text in described if line in text}
    assert leaked == set()
    assert "Refuses fields" not in json.dumps(document)


def test_it_tags_admin_operations_apart_from_agent_operations(document):
    """An operation that needs ``admin`` or ``export`` is an Admin one; everything else an agent's."""
    assert [tag["name"] for tag in document["tags"]] == [AGENT, ADMIN]
    assert all(tag["description"].strip() for tag in document["tags"])
    checked = 0
    for path, _regex, method, callback in EndpointEnumerator().get_api_endpoints():
        if not path.startswith("/api/v1/"):
            continue
        view = callback.cls()
        view.request = SimpleNamespace(method=method)
        admin = view.required_permission in (Permission.ADMIN, Permission.EXPORT)
        operation = document["paths"][path][method.lower()]
        assert operation["tags"] == [ADMIN if admin else AGENT], f"{method} {path}"
        checked += 1
    assert checked == len(list(operations(document)))
    admin = {op["operationId"] for _path, _method, op in operations(document) if op["tags"] == [ADMIN]}
    assert {"createToken", "revokeToken", "listAuditEvents", "eraseUserData", "startExport", "promoteMemory"} <= admin
    assert {"searchMemories", "createMemory", "getSessionContext", "createProposal"}.isdisjoint(admin)
