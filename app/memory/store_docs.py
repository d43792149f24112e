"""The `DocStore` API on LangGraph's `BaseStore`: every memory and cache entry is a store item.

Layout (what Studio's memory view and `client.store.list_namespaces()` show):

- `("recollect", <namespace>, <kind>)`, key = the document's key: turns (`turn`: speaker, text, date_time,
  ...), sessions, MRAgent's events, cues and persona, HyMem's sessions and summaries, MGRetrieval's
  vocabulary and keywords (vectors, MemR3's chunks among them, stay in Chroma).
- `("recollect", <namespace>, "llm_cache")`, key = the content hash: the namespace's LLM replies
  (`recollect.llm.cache.cache_key` is `<namespace>:<hash>`).
- `("recollect", "%global", <kind>)`: the namespace registry (`namespace`), thread bookkeeping
  (`thread`), cache entries written before keys named their namespace, and the migration marker.

A store namespace label cannot hold '.', so a recollect namespace is written with '%', '.' and NUL
percent-escaped (`a@b.com` -> `a@b%2Ecom`). In an escaped label every '%' starts `%25`, `%2E` or `%00`,
so the reserved `%global` can never be a namespace's label, and two namespaces never share one.

Values are dicts with the document's own fields; any other value (a list, a string) is stored as
`{"value": ..., "_wrapped": true}`. `_seq` orders a kind's items by their last write, as `recollect.db`
does (its rowid): callers rely on that order (HyMem's summaries, MRAgent's events). `transaction()`
buffers writes and deletes (reads inside it see them) and applies them in one `store.batch` at the end,
which `RecollectSqliteStore` runs as one SQLite transaction and `RecollectPostgresStore` as one Postgres
transaction (recollect.memory.postgres): a crash or a failure leaves the old or the new version of a build
step, never half of each. Unlike recollect.db's write lock, the buffer does not isolate a read-modify-write
from another process: two processes rewriting one item at once keep the later write (the store API has no
lock to take).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from langgraph.store.base import BaseStore, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from recollect.memory.docstore import DocStore, use_wal

ROOT = "recollect"
GLOBAL = "%global"  # DocStore namespace "": the registry, threads, unprefixed cache entries
CACHE_KIND = "llm_cache"
STORE_FILE = "store.sqlite"
_SEQ, _WRAPPED = "_seq", "_wrapped"
_ALL = sys.maxsize  # search/list limit meaning "every item"
_ESCAPED = re.compile(r"[%.\x00]")
_ESCAPE = re.compile(r"%([0-9A-F]{2})")
_CACHE_KEY = re.compile(r"^(.+):([0-9a-f]{64})$", re.DOTALL)
_MIGRATION = ("", "migration", "recollect.db")  # the marker: copied once, so a later copy never resurrects

Namespace = tuple[str, ...]


def ns_label(namespace: str) -> str:
    """The store label of a recollect namespace ("" = the reserved global label)."""
    if not namespace:
        return GLOBAL
    return _ESCAPED.sub(lambda m: f"%{ord(m.group()):02X}", namespace)


def ns_from_label(label: str) -> str:
    return "" if label == GLOBAL else _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), label)


class _Sequence:
    """Increasing numbers from the wall clock (ns), so writes from different processes order by time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def take(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last


_SEQUENCE = _Sequence()


def _pack(value: Any, seq: int) -> dict[str, Any]:
    # A JSON round trip, as recollect.db stores values: tuples become lists, int keys strings, and nothing
    # the caller keeps a reference to is stored.
    plain = orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
    if isinstance(plain, dict) and _SEQ not in plain and _WRAPPED not in plain:
        plain[_SEQ] = seq
        return plain
    return {"value": plain, _WRAPPED: True, _SEQ: seq}


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _unpack(stored: dict[str, Any]) -> Any:
    if stored.get(_WRAPPED) is True:
        return stored.get("value")
    return {k: v for k, v in stored.items() if k != _SEQ}


class StoreDocs:
    """recollect's document store on any `BaseStore` (the same methods as `DocStore`)."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._local = threading.local()
        # InMemoryStore hands out the stored dicts themselves; SQL stores decode a fresh copy per read.
        self._shared_values = isinstance(store, InMemoryStore)

    # --- layout
    @staticmethod
    def _ns(namespace: str, kind: str) -> Namespace:
        if not kind or "." in kind:
            raise ValueError(f"invalid document kind {kind!r}")
        return (ROOT, ns_label(namespace), kind)

    @staticmethod
    def _cache_slot(key: str) -> tuple[Namespace, str]:
        m = _CACHE_KEY.match(key)
        if m:
            return (ROOT, ns_label(m.group(1)), CACHE_KIND), m.group(2)
        return (ROOT, GLOBAL, CACHE_KIND), key

    # --- transactions: a per-thread buffer of namespace -> key -> packed value (None = delete)
    def _buffer(self) -> dict[Namespace, dict[str, dict[str, Any] | None]] | None:
        return getattr(self._local, "txn", None)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._buffer() is not None:  # nested: join the outer transaction
            yield
            return
        buffer: dict[Namespace, dict[str, dict[str, Any] | None]] = {}
        self._local.txn = buffer
        try:
            yield
        finally:
            self._local.txn = None
        ops = [PutOp(ns, key, value, index=False) for ns, items in buffer.items() for key, value in items.items()]
        if ops:
            self.store.batch(ops)

    def _write(self, ns: Namespace, changes: Iterable[tuple[str, dict[str, Any] | None]]) -> None:
        buffer = self._buffer()
        if buffer is not None:
            buffer.setdefault(ns, {}).update(changes)
            return
        ops = [PutOp(ns, key, value, index=False) for key, value in changes]
        if ops:
            self.store.batch(ops)

    def _stored(self, ns: Namespace, key: str) -> dict[str, Any] | None:
        buffered = (self._buffer() or {}).get(ns, {})
        if key in buffered:  # a copy: changing what a read returned must not change what the batch writes
            return _copy(buffered[key])
        item = self.store.get(ns, key, refresh_ttl=False)
        return None if item is None else item.value

    def _rows(self, ns: Namespace) -> list[tuple[str, dict[str, Any]]]:
        """(key, packed value) of one store namespace, oldest write first, with this thread's buffer applied."""
        found = self.store.search(ns, limit=_ALL, refresh_ttl=False)
        rows: dict[str, dict[str, Any]] = {it.key: it.value for it in found if tuple(it.namespace) == ns}
        for key, value in (self._buffer() or {}).get(ns, {}).items():
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = _copy(value)
        return sorted(rows.items(), key=lambda kv: kv[1].get(_SEQ, 0))

    def _value(self, stored: dict[str, Any]) -> Any:
        value = _unpack(stored)
        return _copy(value) if self._shared_values else value

    # --- documents
    def put(self, namespace: str, kind: str, key: str, value: Any) -> None:
        self._write(self._ns(namespace, kind), [(key, _pack(value, _SEQUENCE.take()))])

    def put_many(self, namespace: str, kind: str, items: dict[str, Any]) -> None:
        ns = self._ns(namespace, kind)
        with self.transaction():
            self._write(ns, [(k, _pack(v, _SEQUENCE.take())) for k, v in items.items()])

    def get(self, namespace: str, kind: str, key: str, default: Any = None) -> Any:
        stored = self._stored(self._ns(namespace, kind), key)
        return default if stored is None else self._value(stored)

    def items(self, namespace: str, kind: str) -> dict[str, Any]:
        return {k: self._value(v) for k, v in self._rows(self._ns(namespace, kind))}

    def keys(self, namespace: str, kind: str) -> list[str]:
        return [k for k, _ in self._rows(self._ns(namespace, kind))]

    def count(self, namespace: str, kind: str) -> int:
        return len(self._rows(self._ns(namespace, kind)))

    def delete(self, namespace: str, kind: str, key: str) -> None:
        self._write(self._ns(namespace, kind), [(key, None)])

    def delete_kind(self, namespace: str, kind: str) -> None:
        ns = self._ns(namespace, kind)
        with self.transaction():
            self._write(ns, [(k, None) for k, _ in self._rows(ns)])

    def delete_namespace(self, namespace: str) -> int:
        """Delete every document of a namespace, its registry entry and its LLM-cache entries.

        Every kind of the namespace, its cache included, lives under `("recollect", <label>)`, which no other
        namespace's label extends (labels hold no '.'). Returns the items removed.
        """
        if not namespace:
            raise ValueError("the registry namespace '' cannot be deleted")
        prefix = (ROOT, ns_label(namespace))
        with self.transaction():
            kinds = {tuple(ns) for ns in self.store.list_namespaces(prefix=prefix, limit=_ALL)}
            kinds.update(ns for ns in self._buffer() or {} if ns[:2] == prefix)
            removed = 0
            for ns in sorted(kinds):
                keys = [k for k, _ in self._rows(ns)]
                self._write(ns, [(k, None) for k in keys])
                removed += len(keys)
            registry = self._ns("", "namespace")
            if self._stored(registry, namespace) is not None:
                self._write(registry, [(namespace, None)])
                removed += 1
        return removed

    def namespaces(self) -> list[str]:
        return sorted(self.keys("", "namespace"))

    # --- LLM response cache (content-hash keys; see recollect.llm.cache)
    def cache_get(self, key: str) -> Any:
        ns, item_key = self._cache_slot(key)
        stored = self._stored(ns, item_key)
        return None if stored is None else self._value(stored)

    def cache_put(self, key: str, value: Any) -> None:
        ns, item_key = self._cache_slot(key)
        self._write(ns, [(item_key, _pack(value, _SEQUENCE.take()))])


class RecollectSqliteStore(SqliteStore):
    """LangGraph's `SqliteStore`, made safe for one data directory shared by processes.

    Three changes, all within LangGraph's schema (any `SqliteStore` reads the file): a batch that fails
    half-way is rolled back (the parent commits what ran before the error); a large batch is written in
    INSERTs that fit SQLite's bound-variable limit (one INSERT of 100k turns exceeds it); and the schema
    is created under a write lock, so two processes opening a fresh file do not both migrate it. `abatch`
    runs `batch` in a worker thread, so the LangGraph server can serve the same file.
    """

    _PARAMS_PER_ROW = 7  # SqliteStore's INSERT binds prefix, key, value, two timestamps, expiry, ttl

    @classmethod
    def open(cls, path: str | Path) -> RecollectSqliteStore:
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
        try:
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL").fetchall()
            store = cls(conn)
            store.setup()
        except BaseException:
            conn.close()
            raise
        return store

    def setup(self) -> None:
        with self.lock:
            if self.is_setup:
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute("CREATE TABLE IF NOT EXISTS store_migrations (v INTEGER PRIMARY KEY)")
                (done,) = self.conn.execute("SELECT coalesce(max(v), -1) FROM store_migrations").fetchone()
                for version in range(done + 1, len(self.MIGRATIONS)):
                    self.conn.execute(self.MIGRATIONS[version])
                    self.conn.execute("INSERT INTO store_migrations (v) VALUES (?)", (version,))
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            self.is_setup = True

    @contextmanager
    def _cursor(self, *, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        if not self.is_setup:
            self.setup()
        with self.lock:
            if transaction:
                self.conn.execute("BEGIN")
            cur = self.conn.cursor()
            try:
                yield cur
            except BaseException:
                if transaction and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            else:
                if transaction:
                    self.conn.execute("COMMIT")
            finally:
                cur.close()

    def _prepare_batch_PUT_queries(self, put_ops: Sequence[tuple[int, PutOp]]) -> Any:  # noqa: N802 - LangGraph's name
        rows = max(1, self.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // (self._PARAMS_PER_ROW + 1))
        queries: list[tuple[str, Sequence[Any]]] = []
        for start in range(0, len(put_ops), rows):
            part, embedding = super()._prepare_batch_PUT_queries(put_ops[start:start + rows])
            if embedding is not None:
                raise ValueError("RecollectSqliteStore keeps no vector index (recollect's vectors live in Chroma)")
            queries.extend(part)
        return queries, None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))


def open_store_docs(path: str | Path) -> StoreDocs:
    """The document store on the SQLite store file at `path` (created with LangGraph's schema)."""
    return StoreDocs(RecollectSqliteStore.open(path))


# --- migration: a data directory's recollect.db into the store, without calling any model


@dataclass
class Migration:
    documents: int
    cache_entries: int
    already: bool  # copied by an earlier run; nothing was copied now
    migrated_at: str


def migrate_doc_db(path: str | Path, docs: StoreDocs) -> Migration:
    """Copy every document and cache entry of the recollect.db at `path` into `docs`, in one batch.

    Idempotent: a marker item records the copy, and a later run copies nothing, so a namespace forgotten
    after the upgrade is never brought back. Write order is kept (the items get increasing `_seq`). The
    copy holds recollect.db's write lock: a second process upgrading at the same moment waits, then finds
    the marker, and nothing writes recollect.db while it is read.
    """
    slot = _marker(path, docs)
    marker = docs.get(*slot)
    if marker is None:
        source = DocStore(path)
        with source.transaction():
            marker = docs.get(*slot)
            if marker is None:
                return _copy_all(source, docs, slot)
    return Migration(marker["documents"], marker["cache_entries"], True, marker["migrated_at"])


def _marker(path: str | Path, docs: StoreDocs) -> tuple[str, str, str]:
    """Where the copy of `path` is recorded. A store file belongs to one data directory; a database
    (RECOLLECT_POSTGRES_URI) holds every data directory's documents, so there the marker names the file, and
    a second data directory's recollect.db is copied too."""
    if isinstance(docs.store, RecollectSqliteStore | InMemoryStore):
        return _MIGRATION
    return (_MIGRATION[0], _MIGRATION[1], f"{_MIGRATION[2]}:{Path(path).expanduser().resolve()}")


def _copy_all(source: DocStore, docs: StoreDocs, slot: tuple[str, str, str] = _MIGRATION) -> Migration:
    rows, cache = source.rows(), source.cache_rows()
    done = Migration(len(rows), len(cache), False, time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    with docs.transaction():
        for namespace, kind, key, value in rows:
            docs.put(namespace, kind, key, value)
        for key, value in cache:
            docs.cache_put(key, value)
        docs.put(*slot, {"documents": done.documents, "cache_entries": done.cache_entries,
                         "migrated_at": done.migrated_at, "source": str(source.path)})
    return done
