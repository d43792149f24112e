"""LangGraph's Postgres store and checkpoint savers, fitted to hold recollect's memory (RECOLLECT_POSTGRES_URI).

Imported only when the URI is set (psycopg comes with the `postgres` extra); `recollect.memory.backends`
opens one pool, one store and one saver per URI and process. The tables and SQL are LangGraph's own, so any
`PostgresStore` or `PostgresSaver` (the LangGraph server's, a notebook's) reads what recollect writes.

Atomicity: `StoreDocs.transaction()` applies a build step in one `batch`, which must commit whole or not at
all. LangGraph's `PostgresStore.batch` sends its statements in one pipeline in autocommit mode, relying on
Postgres running everything up to the pipeline's Sync as one implicit transaction. That holds when the server
rejects a statement, but not when psycopg fails to send one (a key holding NUL, a value it cannot adapt): the
pipeline still syncs on the way out, and the statements already sent commit (a batch deleting one key and
writing another lost the first; tests/storage has it). `RecollectPostgresStore` runs each batch inside an
explicit transaction, which rolls back on any error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres._internal import get_connection
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.base import PutOp
from langgraph.store.postgres import PostgresStore
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

# What LangGraph's Postgres classes require of a connection: autocommit (its migrations create indexes
# CONCURRENTLY, which cannot run inside a transaction), no server-side prepared statements (they break behind
# PgBouncer), rows as dicts.
CONNECTION_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
POOL_MAX = 10  # connections per process: the server's worker threads each hold one only while a batch runs
_SCHEMA_LOCK = 0x7265636F6C6C6563  # pg_advisory_lock key ("recollec")
_NUL, _REPLACEMENT = "\x00", "\ufffd"


class PostgresError(ValueError):
    """RECOLLECT_POSTGRES_URI cannot be used: the URI is malformed or the server cannot be reached."""


def describe(uri: str) -> str:
    """The URI's database and host, for messages: never its password."""
    try:
        parts = conninfo_to_dict(uri)
    except psycopg.Error:
        return "a malformed URI"
    where = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"database {parts.get('dbname') or parts.get('user') or '(default)'} on {where}{port}"


def check_connection(uri: str, timeout_s: int = 10) -> None:
    """Connect once, so a wrong URI fails now with libpq's reason instead of after the pool's 30 s wait."""
    try:
        conninfo_to_dict(uri)
    except psycopg.Error:  # libpq's reason quotes the text, which may hold the password
        raise PostgresError("RECOLLECT_POSTGRES_URI is not a libpq URI of the form "
                            "postgresql://user:password@host:port/database") from None
    try:
        psycopg.connect(uri, connect_timeout=timeout_s, **CONNECTION_KWARGS).close()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PostgresError(f"cannot connect to the {describe(uri)} of RECOLLECT_POSTGRES_URI: {reason}") from None


def connection_pool(uri: str) -> ConnectionPool:
    check_connection(uri)
    pool = ConnectionPool(uri, kwargs=CONNECTION_KWARGS, min_size=1, max_size=POOL_MAX, open=True,
                          name="recollect")
    pool.wait(timeout=30)
    return pool


async def async_connection_pool(uri: str) -> AsyncConnectionPool:
    pool = AsyncConnectionPool(uri, kwargs=CONNECTION_KWARGS, min_size=1, max_size=POOL_MAX, open=False,
                               name="recollect-async")
    await pool.open(wait=True, timeout=30)
    return pool


@contextmanager
def schema_lock(pool: ConnectionPool, wait_s: float = 300.0) -> Iterator[None]:
    """Held while this process creates or upgrades the tables. Two processes starting on a fresh database
    would otherwise race in Postgres's catalog (CREATE TABLE IF NOT EXISTS is not safe against a concurrent
    one) and both record the same migration.

    Taken by polling, never by a blocking pg_advisory_lock: a session blocked in that call holds a snapshot,
    and the holder's CREATE INDEX CONCURRENTLY (LangGraph's migrations) waits for every older snapshot to
    end, so the two would wait for each other forever.
    """
    deadline = time.monotonic() + wait_s
    # recollect's pools are made from a URI string (connection_pool); psycopg_pool also takes a callable
    where = describe(pool.conninfo) if isinstance(pool.conninfo, str) else "database"
    with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        while not (row := cur.execute("SELECT pg_try_advisory_lock(%s) AS locked", (_SCHEMA_LOCK,)).fetchone()) \
                or not row["locked"]:
            if time.monotonic() > deadline:
                raise PostgresError(f"another process has held the schema lock of the {where} "
                                    f"for {wait_s:.0f} s (creating its tables); try again when it is done")
            time.sleep(0.1)
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))


def without_nul(value: Any) -> Any:
    """`value` with U+0000 in its strings replaced by U+FFFD: Postgres's text and jsonb cannot hold it (SQLite
    can), and a model's junk reply may carry one into the LLM cache or a run's state."""
    if isinstance(value, str):
        return value.replace(_NUL, _REPLACEMENT) if _NUL in value else value
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value


class RecollectPostgresStore(PostgresStore):
    """LangGraph's `PostgresStore` with four changes that leave its tables and SQL as they are. A batch runs in
    one explicit transaction (see the module's docstring); a large batch is written in statements that fit
    Postgres's 65,535 bound parameters (one INSERT of 100k turns binds 400k); strings in values lose their NUL
    characters (`without_nul`); and a batch on a connection pool takes its own connection without the
    store-wide lock, which LangGraph takes because one connection cannot be shared, so the server's threads
    read and write concurrently.
    """

    _OPS_PER_QUERY = 10_000  # an INSERT row binds at most 5 parameters, a DELETE one per key

    def _prepare_batch_PUT_queries(self, put_ops: Sequence[tuple[int, PutOp]]) -> Any:  # noqa: N802 - LangGraph's name
        latest: dict[tuple[tuple[str, ...], str], tuple[int, PutOp]] = {}
        for idx, op in put_ops:  # the last write of a key wins, as in one unsplit batch
            latest.pop((op.namespace, op.key), None)
            latest[(op.namespace, op.key)] = (idx, op if op.value is None else op._replace(value=without_nul(op.value)))
        ops = list(latest.values())
        queries: list[tuple[str, Sequence[Any]]] = []
        for start in range(0, len(ops), self._OPS_PER_QUERY):
            part, embedding = super()._prepare_batch_PUT_queries(ops[start:start + self._OPS_PER_QUERY])
            if embedding is not None:
                raise ValueError("RecollectPostgresStore keeps no vector index (recollect's vectors live in Chroma)")
            queries.extend(part)
        return queries, None

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        if not pipeline or self.pipe is not None:  # setup and the TTL sweep; a caller's own pipeline
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        with nullcontext() if isinstance(self.conn, ConnectionPool) else self.lock, \
                get_connection(self.conn) as conn, conn.transaction(), \
                conn.pipeline() if self.supports_pipeline else nullcontext(), \
                conn.cursor(binary=True, row_factory=dict_row) as cur:
            yield cur


def _inline_safe(checkpoint: Any) -> Any:
    """The checkpoint with NUL-free strings among the channel values the saver stores inline as jsonb (other
    values go to bytea blobs through the serializer and keep theirs)."""
    values = checkpoint.get("channel_values") or {}
    if not any(isinstance(v, str) and _NUL in v for v in values.values()):
        return checkpoint
    return {**checkpoint, "channel_values": {k: without_nul(v) if isinstance(v, str) else v for k, v in values.items()}}


class RecollectPostgresSaver(PostgresSaver):
    """LangGraph's `PostgresSaver`, storing a state string that holds NUL (a junk model reply) instead of failing
    the run on Postgres's jsonb."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return super().put(config, _inline_safe(checkpoint), without_nul(metadata), new_versions)


class RecollectAsyncPostgresSaver(AsyncPostgresSaver):
    """The async saver of `recollect serve`, with `RecollectPostgresSaver`'s change."""

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await super().aput(config, _inline_safe(checkpoint), without_nul(metadata), new_versions)
