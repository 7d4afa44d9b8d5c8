"""The dense stage on a side connection (``retrieval.side``): same answers as on the request's
connection, bound to the caller's tenant, and the request's connection takes over when no side
connection is free or the query cannot be embedded.

Committed data (a transactional test database): a side connection cannot see a test's
uncommitted transaction.
"""

from concurrent.futures import Future

import pytest
from django.test import override_settings
from psycopg.pq import TransactionStatus

from memory_service.embeddings.backends import EmbeddingUnavailable, get_backend
from memory_service.memories.embedding import embed_memories, pending_memory_ids
from memory_service.retrieval import side
from tenants.context import tenant_context
from tests.conftest import ALL_PERMISSIONS, client_for
from tests.factories import make_tenant, make_token

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

NOTES = [
    "Connection pool exhaustion was fixed by lowering pool_size to 20",
    "会議は毎週月曜日の午前10時に行う",
    "The frontend uses React with Vite",
]


def _seeded_client(slug: str):
    tenant = make_tenant(slug)
    client = client_for(make_token(tenant, permissions=ALL_PERMISSIONS).raw)
    for text in NOTES:
        response = client.post("/api/v1/memories", {"scope": "repository", "repository": "r1", "kind": "note",
                                                    "text": text}, format="json")  # fmt: skip
        assert response.status_code == 201, response.content
    with tenant_context(tenant.id):
        ids = pending_memory_ids(tenant_id=str(tenant.id), limit=100)
        assert embed_memories(tenant_id=str(tenant.id), memory_ids=ids, backend=get_backend()) == 3
    return client


def _search(client, query: str) -> dict:
    response = client.post("/api/v1/search", {"query": query, "user": "u1", "repository": "r1"}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _ranking(result: dict) -> list[tuple[str, float]]:
    return [(item["text"], round(item["score"], 6)) for item in result["items"]]


def test_the_side_connection_finds_what_the_request_connection_finds(side_connections, monkeypatch):
    client = _seeded_client("side-same")
    queries = ["too many database connections", "When is the weekly meeting?", "接続プール"]
    with override_settings(SEARCH_SIDE_CONNECTIONS=0):
        sequential = [_search(client, q) for q in queries]
    served_before = side_connections().get("requests_num", 0)
    side_rows = []
    run_dense = side._run_dense
    monkeypatch.setattr(side, "_run_dense", lambda *args: side_rows.append(run_dense(*args)) or side_rows[-1])
    parallel = [_search(client, q) for q in queries]
    assert side_connections().get("requests_num", 0) - served_before == len(queries)
    # Each search took its dense rows from the side connection: the scope's 3 vectors counted.
    assert [found.rows[0][0] for found in side_rows] == [3, 3, 3]
    assert [found.follow_up for found in side_rows] == [None, None, None]  # a small scope: no HNSW k-NN

    assert [_ranking(r) for r in parallel] == [_ranking(r) for r in sequential]
    assert parallel[0]["items"][0]["text"].startswith("Connection pool exhaustion")
    assert parallel[1]["items"][0]["text"] == "会議は毎週月曜日の午前10時に行う"
    assert all(r["degraded"] is False for r in parallel)


def test_the_side_transaction_is_read_only_bound_to_the_tenant_and_ended(side_connections):
    vector = Future()
    vector.set_result([0.0])
    tenant_id = "7b0e1f0e-34b7-4f4c-9d55-2d6a0d1b9a11"
    settings_sql = "SELECT current_setting('transaction_read_only'), current_setting('app.tenant_id')"
    found = side.dense_rows_in_background(
        vector, lambda _vector: (settings_sql, []), tenant_id=tenant_id, follow_up=lambda _v, _rows: (settings_sql, [])
    )
    assert found.result() == side.DenseRows(rows=[("on", tenant_id)], follow_up=[("on", tenant_id)])

    write_sql = "CREATE TEMP TABLE t (x int)"
    refused = side.dense_rows_in_background(vector, lambda _vector: (write_sql, []), tenant_id=tenant_id)
    assert refused.result() is None  # the caller runs the statement itself
    pool = side.side_pool()
    held = [pool.getconn(), pool.getconn()]
    try:
        assert [conn.info.transaction_status for conn in held] == [TransactionStatus.IDLE] * 2
    finally:
        for conn in held:
            pool.putconn(conn)


def test_a_failed_follow_up_is_left_to_the_request_connection(side_connections):
    vector = Future()
    vector.set_result([0.0])
    found = side.dense_rows_in_background(
        vector,
        lambda _vector: ("SELECT 1", []),
        tenant_id="7b0e1f0e-34b7-4f4c-9d55-2d6a0d1b9a11",
        follow_up=lambda _vector, rows: (f"SELECT {rows[0][0]} / 0", []),
    )
    assert found.result() == side.DenseRows(rows=[(1,)], follow_up=None)


def test_another_tenants_search_on_a_side_connection_sees_none_of_it(side_connections):
    _seeded_client("side-owner")
    other = client_for(make_token(make_tenant("side-other"), permissions=ALL_PERMISSIONS).raw)
    served_before = side_connections().get("requests_num", 0)
    result = _search(other, "too many database connections")
    assert side_connections().get("requests_num", 0) - served_before == 1
    assert result["items"] == []


def test_the_request_connection_runs_the_dense_stage_when_no_side_connection_is_free(side_connections):
    client = _seeded_client("side-busy")
    expected = _ranking(_search(client, "too many database connections"))
    pool = side.side_pool()
    held = [pool.getconn(), pool.getconn()]
    try:
        assert _ranking(_search(client, "too many database connections")) == expected
    finally:
        for conn in held:
            pool.putconn(conn)
    assert expected[0][0].startswith("Connection pool exhaustion")


def test_a_search_runs_sequentially_when_every_side_thread_is_busy(side_connections):
    client = _seeded_client("side-threads")
    expected = _ranking(_search(client, "too many database connections"))
    waiting = [Future(), Future()]  # two searches whose query is still being embedded
    busy = [side.dense_rows_in_background(f, lambda vector: ("SELECT 1", []), tenant_id="x") for f in waiting]
    try:
        assert all(b is not None for b in busy)
        assert side.dense_rows_in_background(Future(), lambda vector: ("SELECT 1", []), tenant_id="x") is None
        served_before = side_connections().get("requests_num", 0)
        assert _ranking(_search(client, "too many database connections")) == expected
        assert side_connections().get("requests_num", 0) == served_before  # ran on the request's connection
    finally:
        for future in waiting:
            future.set_exception(EmbeddingUnavailable("test"))
    assert [b.result() for b in busy] == [None, None]
    freed = side.dense_rows_in_background(_done([0.0] * 3), lambda vector: ("SELECT 1", []), tenant_id="x")
    assert freed is not None and freed.result() == side.DenseRows(rows=[(1,)])  # the slots are free again


def _done(value) -> Future:
    future = Future()
    future.set_result(value)
    return future


@override_settings(EMBEDDING_BACKEND="openai", EMBEDDING_URL="http://127.0.0.1:9", EMBEDDING_MODEL="m",
                   EMBEDDING_DIMENSION=8, EMBEDDING_TIMEOUT=0.5)  # fmt: skip
def test_a_query_that_cannot_be_embedded_still_gets_the_lexical_matches(side_connections):
    get_backend.cache_clear()
    try:
        tenant = make_tenant("side-degraded")
        client = client_for(make_token(tenant, permissions=ALL_PERMISSIONS).raw)
        client.post("/api/v1/memories", {"scope": "repository", "repository": "r1", "kind": "note",
                                         "text": "lexical fallback still works"}, format="json")  # fmt: skip
        result = _search(client, "fallback")
        assert result["degraded"] is True
        assert [i["text"] for i in result["items"]] == ["lexical fallback still works"]
    finally:
        get_backend.cache_clear()
