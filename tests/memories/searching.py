"""Helpers of the ranking tests: a note written through the API, and the scores a search gives it."""

from memory_service.retrieval.search import RANKING, memory_search
from tenants.access import Principal
from tenants.context import tenant_context
from tenants.models import ApiToken


def write_note(client, text: str, **fields) -> str:
    """POST a note of user "u1" with ``text`` (and ``fields``: title, occurred_at …); its id."""
    body = {"scope": "user", "user": "u1", "text": text} | fields
    response = client.post("/api/v1/memories", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def search_scores(tenant, query: str, ranking=RANKING, where=None) -> dict[str, float]:
    """memory id → score of each ranked hit of ``query`` in user "u1" (or the scopes ``where``
    names: ``{"repository": "r1"}``), the recent additions left out, searched with the tenant's
    token under ``ranking``."""
    with tenant_context(tenant.id):
        principal = Principal.from_token(ApiToken.objects.get(tenant=tenant))
        hits = memory_search(principal=principal, query=query, ranking=ranking, **(where or {"user": "u1"})).hits
    return {str(hit.memory.id): hit.score for hit in hits if "RECENT" not in hit.markers}
