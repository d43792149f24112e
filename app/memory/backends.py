"""Where documents and checkpoints live: files in the data directory, or one Postgres database.

Without RECOLLECT_POSTGRES_URI each data directory has its own SQLite files (store.sqlite, checkpoints.sqlite)
and every Workspace opens its own connection to them. With it, every data directory of every process on
every machine shares the one database, so a process opens one connection pool, one store and one saver per
URI and shares them (`postgres_store`, `postgres_saver`): the LangGraph server's threads, the CLI and each
Workspace object then read what any of them wrote, on at most POOL_MAX connections (`recollect serve` has a
second pool for its async checkpoint saver, on its event loop).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from langgraph.store.base import BaseStore

from recollect.memory.store_docs import STORE_FILE, RecollectSqliteStore, StoreDocs, migrate_doc_db

_LOCK = threading.RLock()  # re-entered: making a store makes its pool
_SHARED: dict[tuple[str, str], Any] = {}  # (what, uri) -> the pool, store or saver


def postgres_uri() -> str:
    """RECOLLECT_POSTGRES_URI ("" = the data directory's SQLite files)."""
    from recollect.settings import get_settings

    return get_settings().postgres_uri.strip()


def document_backend(doc_store: str | None = None) -> str:
    """Which document store a data directory opens: `doc_store`, else RECOLLECT_DOC_STORE, where a Postgres
    URI implies "langgraph" (its store holds the documents); "recollect_db" named with the URI is an error,
    since the documents would stay in a file while the checkpoints went to the database."""
    from recollect.settings import get_settings

    settings, uri = get_settings(), postgres_uri()
    backend = doc_store or settings.doc_store
    if backend not in ("recollect_db", "langgraph"):
        raise ValueError(f"unknown document store {backend!r} (use recollect_db or langgraph)")
    if uri and backend == "recollect_db" and (doc_store is not None or "doc_store" in settings.model_fields_set):
        raise ValueError("RECOLLECT_DOC_STORE=recollect_db cannot be used with RECOLLECT_POSTGRES_URI: the "
                         "documents would stay in recollect.db while checkpoints went to Postgres; unset one "
                         "(RECOLLECT_POSTGRES_URI keeps documents in LangGraph's Postgres store)")
    return "langgraph" if uri else backend


def open_base_store(data_dir: Path) -> BaseStore:
    """The LangGraph store holding the data directory's documents: the Postgres store of
    RECOLLECT_POSTGRES_URI (shared by the process), else a new connection to `<data_dir>/store.sqlite`."""
    uri = postgres_uri()
    if uri:
        return postgres_store(uri)
    return RecollectSqliteStore.open(Path(data_dir) / STORE_FILE)


def _postgres() -> ModuleType:
    try:
        from recollect.memory import postgres
    except ImportError as exc:
        raise ValueError(f"RECOLLECT_POSTGRES_URI is set, but the Postgres packages are not installed ({exc}); "
                         "install them with: pip install 'recollect[postgres]'") from exc
    return postgres


def _shared(what: str, uri: str, make: Callable[[], Any]) -> Any:
    with _LOCK:
        found = _SHARED.get((what, uri))
        if found is None:
            found = _SHARED[(what, uri)] = make()
        return found


def _pool(uri: str) -> Any:
    return _shared("pool", uri, lambda: _postgres().connection_pool(uri))


def postgres_store(uri: str) -> BaseStore:
    """The process's store on `uri`, its tables created or upgraded on first use."""
    def make() -> Any:
        pg, pool = _postgres(), _pool(uri)
        store = pg.RecollectPostgresStore(pool)
        with pg.schema_lock(pool):
            store.setup()
        return store

    return _shared("store", uri, make)


def postgres_saver(uri: str) -> Any:
    """The process's checkpoint saver on `uri` (for the CLI and Python), its tables created on first use."""
    def make() -> Any:
        pg, pool = _postgres(), _pool(uri)
        saver = pg.RecollectPostgresSaver(pool)
        with pg.schema_lock(pool):
            saver.setup()
        return saver

    return _shared("saver", uri, make)


@asynccontextmanager
async def async_postgres_saver(uri: str) -> AsyncIterator[Any]:
    """An async saver on `uri` (`recollect serve`), on a pool of its own event loop, closed on exit."""
    import asyncio

    await asyncio.to_thread(postgres_saver, uri)  # the tables, created under the schema lock
    pg = _postgres()
    pool = await pg.async_connection_pool(uri)
    try:
        yield pg.RecollectAsyncPostgresSaver(pool)
    finally:
        await pool.close()


def close_postgres() -> None:
    """Close the process's pools (at exit, or before the database goes away); the next use opens new ones."""
    with _LOCK:
        pools = [v for (what, _), v in _SHARED.items() if what == "pool"]
        _SHARED.clear()
    for pool in pools:
        pool.close()


atexit.register(close_postgres)


@asynccontextmanager
async def server_store() -> AsyncIterator[BaseStore]:
    """The store `recollect serve` runs with (langgraph.json `store.path`): the data directory's store
    file, or the Postgres store of RECOLLECT_POSTGRES_URI, so the SDK's store API and Studio's memory view
    list what `recollect ingest` built, from any process. Both serve async calls by running `batch` in a
    worker thread (`abatch`): the Postgres store on its pool, the process's graphs sharing it."""
    from recollect.settings import get_settings

    settings = get_settings()
    data_dir = Path(settings.data_dir).expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    backend = document_backend()
    store = open_base_store(data_dir)
    try:
        if backend == "langgraph" and (data_dir / "recollect.db").exists():
            migrate_doc_db(data_dir / "recollect.db", StoreDocs(store))  # listed before any graph has run
        yield store
    finally:
        if isinstance(store, RecollectSqliteStore):  # a Postgres store belongs to the process (backends)
            store.conn.close()
