"""The embedded database for structured indexes: namespaced JSON documents in SQLite (`recollect.db`).

Keyword maps, the Cue–Tag–Content graph, summary ↔ raw links, turn texts and the LLM response
cache all live here, beside Chroma in the data directory. Every read and write names its
namespace, so no query can cross one. Writes of one build step go through `transaction()` so a
crash leaves either the old or the new version, never half of each.

This is the `RECOLLECT_DOC_STORE=recollect_db` backend; `recollect.memory.store_docs.StoreDocs` is the
same API on a LangGraph `BaseStore` (`langgraph`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
  namespace TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (namespace, kind, key)
);
CREATE TABLE IF NOT EXISTS llm_cache (
  key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL DEFAULT (julianday('now'))
);
"""


CACHE_HASH_CHARS = 64  # recollect.llm.cache.cache_key: `<namespace>:<sha256 hex>`


def use_wal(conn: sqlite3.Connection, timeout: float = 30.0) -> None:
    """Put the connection's database in WAL mode (kept in the file), waiting up to `timeout` seconds for others.

    SQLite answers a journal-mode switch that meets another connection's lock with "database is locked" at
    once: its busy handler does not wait there. Processes opening one fresh data directory together (an
    upgrade run by four at once, tests/core/test_migrate.py) then failed one in a few hundred runs. A database
    already in WAL mode needs no switch, so only the first opening ever waits."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            # Read every row: an unfinished PRAGMA statement holds a read transaction open and locks out
            # every other writer (see recollect.runner.open_checkpointer).
            (mode,) = conn.execute("PRAGMA journal_mode").fetchall()[0]
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.1)


class DocStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        if conn.in_transaction:  # nested: join the outer transaction
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # --- documents
    def put(self, namespace: str, kind: str, key: str, value: Any) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO docs VALUES (?,?,?,?)", (namespace, kind, key, json.dumps(value, ensure_ascii=False))
        )

    def put_many(self, namespace: str, kind: str, items: dict[str, Any]) -> None:
        with self.transaction() as c:
            c.executemany(
                "INSERT OR REPLACE INTO docs VALUES (?,?,?,?)",
                [(namespace, kind, k, json.dumps(v, ensure_ascii=False)) for k, v in items.items()],
            )

    def get(self, namespace: str, kind: str, key: str, default: Any = None) -> Any:
        row = self._conn().execute(
            "SELECT value FROM docs WHERE namespace=? AND kind=? AND key=?", (namespace, kind, key)
        ).fetchone()
        return json.loads(row[0]) if row else default

    def items(self, namespace: str, kind: str) -> dict[str, Any]:
        rows = self._conn().execute(
            "SELECT key, value FROM docs WHERE namespace=? AND kind=? ORDER BY rowid", (namespace, kind)
        )
        return {k: json.loads(v) for k, v in rows}

    def keys(self, namespace: str, kind: str) -> list[str]:
        rows = self._conn().execute("SELECT key FROM docs WHERE namespace=? AND kind=? ORDER BY rowid", (namespace, kind))
        return [r[0] for r in rows]

    def count(self, namespace: str, kind: str) -> int:
        return int(
            self._conn().execute("SELECT COUNT(*) FROM docs WHERE namespace=? AND kind=?", (namespace, kind)).fetchone()[0]
        )

    def delete(self, namespace: str, kind: str, key: str) -> None:
        self._conn().execute("DELETE FROM docs WHERE namespace=? AND kind=? AND key=?", (namespace, kind, key))

    def delete_kind(self, namespace: str, kind: str) -> None:
        self._conn().execute("DELETE FROM docs WHERE namespace=? AND kind=?", (namespace, kind))

    def delete_namespace(self, namespace: str) -> int:
        """Delete every document of a namespace, its registry entry and its LLM-cache entries.

        Cache keys are `<namespace>:<sha256 hex>` (see `recollect.llm.cache.cache_key`); a namespace may
        itself hold ':', so the key's length must match too ("a"'s prefix `a:` also starts every key of
        "a:b"). Returns the rows removed.
        """
        if not namespace:
            raise ValueError("the registry namespace '' cannot be deleted")
        prefix = namespace + ":"
        with self.transaction() as c:
            n = c.execute("DELETE FROM docs WHERE namespace=?", (namespace,)).rowcount
            n += c.execute("DELETE FROM docs WHERE namespace='' AND kind='namespace' AND key=?", (namespace,)).rowcount
            n += c.execute("DELETE FROM llm_cache WHERE substr(key, 1, ?) = ? AND length(key) = ?",
                           (len(prefix), prefix, len(prefix) + CACHE_HASH_CHARS)).rowcount
        return n

    def namespaces(self) -> list[str]:
        rows = self._conn().execute("SELECT key FROM docs WHERE namespace='' AND kind='namespace' ORDER BY key")
        return [r[0] for r in rows]

    # --- LLM response cache (content-hash keys; see recollect.llm.cache)
    def cache_get(self, key: str) -> Any:
        row = self._conn().execute("SELECT value FROM llm_cache WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def cache_put(self, key: str, value: Any) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO llm_cache (key, value) VALUES (?,?)", (key, json.dumps(value, ensure_ascii=False))
        )

    # --- everything, in write order (`recollect migrate` copies it into a LangGraph store). Lists, not
    # generators: a half-read cursor would hold a read transaction open and lock other writers out.
    def rows(self) -> list[tuple[str, str, str, Any]]:
        """(namespace, kind, key, value) of every document, oldest write first."""
        rows = self._conn().execute("SELECT namespace, kind, key, value FROM docs ORDER BY rowid").fetchall()
        return [(ns, kind, key, json.loads(value)) for ns, kind, key, value in rows]

    def cache_rows(self) -> list[tuple[str, Any]]:
        """(key, value) of every LLM-cache entry, oldest write first."""
        rows = self._conn().execute("SELECT key, value FROM llm_cache ORDER BY rowid").fetchall()
        return [(key, json.loads(value)) for key, value in rows]
