"""The dense stage on a connection of its own, while the request's connection runs the text stage.

A search's two candidate statements are independent: the text statement (lexical and recent) needs
no query vector, the dense statement needs nothing the text statement finds. ``dense_rows_in_background``
runs, on a helper thread, the wait for the query's vector and then the dense statement on a
connection from a small pool of this process (``SEARCH_SIDE_CONNECTIONS``; 0 turns it off), while
the request's thread sends the text statement; when the dense statement's rows say the scope is
too large for it, the HNSW k-NN follows on the same connection (``follow_up``). The search then
takes the rows it fetched.

The side transaction is read-only and bound to the token's tenant like every other transaction
(row-level security; the statement also names the tenant). It reads committed data, as each
statement of the request's READ COMMITTED transaction does. When every side thread is busy with
another search, no side connection is free within 2 ms, or the side statement fails, the search
runs the dense statement on the request's connection afterwards, exactly as with the feature off.
"""

import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import connections
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_service.embeddings.backends import EmbeddingUnavailable
from tenants.context import tenant_binding_sql

logger = logging.getLogger(__name__)

# How long the helper waits for a free side connection before leaving the statement to the request's.
_WAIT_S = 0.002


@dataclass
class _Side:
    """One process's side connections, the threads that use them and a slot per thread: a search
    that finds no free slot runs sequentially instead of queueing behind other searches."""

    pid: int
    pool: ConnectionPool
    threads: ThreadPoolExecutor
    slots: threading.BoundedSemaphore


# Made by the process that uses it, never inherited through a fork.
_side: _Side | None = None
_side_lock = threading.Lock()


def _side_pool() -> _Side | None:
    """This process's side connections and threads, opened on first use; None when turned off."""
    global _side
    size = settings.SEARCH_SIDE_CONNECTIONS
    if size <= 0:
        return None
    with _side_lock:
        if _side is None or _side.pid != os.getpid():
            kwargs = connections["default"].get_connection_params()
            # Connections are opened in the background: searches before they are ready run sequentially.
            # Autocommit: each dense statement brings its own transaction (``_run_dense``).
            pool = ConnectionPool(
                kwargs=kwargs | {"autocommit": True}, min_size=size, max_size=size, name="search-side", open=False
            )
            pool.open(wait=False)
            threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="search-side")
            _side = _Side(pid=os.getpid(), pool=pool, threads=threads, slots=threading.BoundedSemaphore(size))
        return _side


def side_pool() -> ConnectionPool | None:
    """This process's pool of side connections (None when turned off)."""
    side = _side_pool()
    return side.pool if side is not None else None


def close_side_pool() -> None:
    """Close this process's side connections (the next search opens them again)."""
    global _side
    with _side_lock:
        if _side is not None and _side.pid == os.getpid():
            _side.threads.shutdown(wait=True)
            _side.pool.close()
        _side = None


@dataclass(frozen=True)
class DenseRows:
    """What a side connection fetched: the dense statement's rows, and the follow-up's when one ran."""

    rows: list[tuple]
    follow_up: list[tuple] | None = None


def dense_rows_in_background(pending_vector: Future, statement, *, tenant_id, follow_up=None) -> Future | None:
    """Start the dense stage on a side connection once the query's vector is there.

    ``statement(vector) -> (sql, params)`` builds the dense statement; ``follow_up(vector, rows) ->
    (sql, params) | None`` what to run next on the same connection given its rows (the HNSW k-NN of
    a large scope), in a transaction of its own. The future's ``result()`` is a ``DenseRows``, or
    None when the vector is missing or no side connection could run the dense statement (the caller
    then runs it on its own connection; a follow-up that fails leaves ``follow_up`` None, for the
    caller to run). Returns None when the feature is off or every side thread is busy with another
    search.
    """
    side = _side_pool()
    if side is None or not side.slots.acquire(blocking=False):
        return None
    try:
        return side.threads.submit(_dense_rows, side, pending_vector, statement, follow_up, str(tenant_id))
    except BaseException:
        side.slots.release()
        raise


def _dense_rows(side: _Side, pending_vector: Future, statement, follow_up, tenant_id: str) -> DenseRows | None:
    try:
        return _run_dense(side.pool, pending_vector, statement, follow_up, tenant_id)
    finally:
        side.slots.release()


def _run_dense(pool: ConnectionPool, pending_vector: Future, statement, follow_up, tenant_id: str) -> DenseRows | None:
    try:
        vector = pending_vector.result()
    except EmbeddingUnavailable:
        return None
    try:
        conn = pool.getconn(timeout=_WAIT_S)
    except PoolTimeout:
        return None
    try:
        rows = _read_only(conn, tenant_id, *statement(vector))
        if rows is None:
            return None
        more = follow_up(vector, rows) if follow_up is not None else None
        return DenseRows(rows=rows, follow_up=_read_only(conn, tenant_id, *more) if more is not None else None)
    finally:
        pool.putconn(conn)  # a broken connection is discarded and replaced by the pool


def _read_only(conn, tenant_id: str, sql: str, params: list) -> list[tuple] | None:
    """The rows of the last statement of ``sql`` that returns rows, in one round trip: a read-only
    transaction bound to the tenant, the statements, its end. None when it fails."""
    bind, bind_params = tenant_binding_sql(tenant_id)
    rows = None
    try:
        with conn.cursor() as cursor:
            # (On an error the server skips the rest; the pool rolls the connection back.)
            cursor.execute("BEGIN READ ONLY; " + bind + sql + "; ROLLBACK", [*bind_params, *params])
            while True:
                if cursor.description is not None:
                    rows = cursor.fetchall()
                if not cursor.nextset():
                    break
        return rows
    except psycopg.Error:
        logger.warning("dense stage on a side connection failed; running it on the request's", exc_info=True)
        return None
