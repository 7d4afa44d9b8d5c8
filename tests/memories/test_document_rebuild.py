"""Migration 0011 rebuilds stored full-text documents with stems, and the owner counts follow."""

from datetime import UTC, datetime
from importlib import import_module

import pytest
from django.db import connections

from memory_service.memories.models import Memory, OwnerLexicalStats
from tenants.context import tenant_context

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

rebuild = import_module("memory_service.memories.migrations.0011_stemmed_documents")


class SchemaEditor:
    connection = connections["admin"]


def test_it_rebuilds_documents_written_without_stems(write, tenant):
    ids = [write(text=f"Driving classes, lesson {n}").json()["id"] for n in range(3)]
    with connections["admin"].cursor() as cursor:  # as an older version stored them: no stems
        cursor.execute(
            "UPDATE memories_memory SET search_vector = to_tsvector('simple', 'driving classes ' || id::text)"
            " WHERE id = ANY(%s::uuid[])",
            [ids],
        )
    rebuild.rebuild_documents(None, SchemaEditor())
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM memories_memory WHERE id = ANY(%s::uuid[])", [ids])
        documents = [row[0] for row in cursor.fetchall()]
    assert len(documents) == 3
    assert all("'drive'" in d and "'class'" in d and "'driving'" not in d for d in documents)
    with tenant_context(tenant.id):
        stats = OwnerLexicalStats.objects.for_tenant(tenant).get(owner_key="user:u1")
        lengths = list(Memory.objects.for_tenant(tenant).values_list("lexical_length", flat=True))
    assert (stats.documents, stats.terms) == (3, sum(lengths))
    year = f"'{datetime.now(UTC):%Y}'"  # the memory's date is still in its document
    assert all(year in d for d in documents)
