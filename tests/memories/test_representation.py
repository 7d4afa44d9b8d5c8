"""The API's memory representation, built directly, against DRF's own walk of the declared fields."""

import pytest
from rest_framework import serializers

from memory_service.memories.api.serializers import MemoryOutputSerializer
from memory_service.memories.models import Memory
from memory_service.memories.selectors import memory_statuses
from tenants.access import Principal
from tenants.context import tenant_context
from tenants.models import ApiToken

pytestmark = pytest.mark.django_db


def test_the_direct_representation_equals_the_declared_fields(write, api_client, tenant):
    full = write(
        text="Use the blue-green deploy",
        kind="decision",
        scope="repository",
        repository="r1",
        title="Deploys",
        tags=["deploy", "ci"],
        metadata={"ticket": "OPS-1", "weight": 2, "nested": {"a": [1, None]}},
        external_id="dec-1",
        occurred_at="2026-03-04T05:06:07.123456+09:00",
        valid_until="2027-01-01T00:00:00Z",
        lifecycle="proposed",
        priority="high",
    ).json()["id"]
    bare = write(text="a session note", scope="session", user="u1", session="s1").json()["id"]
    replacement = write(text="Use canary deploys", kind="decision", scope="repository", repository="r1").json()["id"]
    assert api_client.post(f"/api/v1/memories/{full}/supersede", {"by": replacement}, format="json").status_code == 200

    with tenant_context(tenant.id):
        memories = list(Memory.objects.filter(id__in=[full, bare, replacement]))
        statuses = memory_statuses(
            principal=Principal.from_token(ApiToken.objects.get(tenant=tenant)), memories=memories
        )
    context = {"statuses": statuses, "scores": {memories[0].id: 0.123456}, "markers": {memories[0].id: ["HIGH"]}}
    for memory in memories:
        serializer = MemoryOutputSerializer(context=context)
        direct = serializer.to_representation(memory)
        declared = serializers.Serializer.to_representation(serializer, memory)
        assert direct == declared
        assert list(direct) == list(declared)
