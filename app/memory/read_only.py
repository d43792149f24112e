"""A data directory read without writing anything (`recollect namespaces`, `recollect history`).

`open_workspace` and `open_checkpointer` open a data directory to write: they create it, check that it is
writable and set up the stores' tables, so a read-only data directory (a mounted backup, another user's
files) is refused, and a command that fails leaves new files behind. Reading the registry of namespaces
and threads, or a thread's checkpoints, needs none of that: the files are opened read-only and a missing
one holds nothing, so these commands work on a read-only data directory and create nothing in a fresh one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from recollect.memory.backends import document_backend, postgres_store, postgres_uri
from recollect.memory.store_docs import _MIGRATION, STORE_FILE, RecollectSqliteStore, StoreDocs
from recollect.memory.workspace import DataDirError, NamespaceInfo

_LEGACY_FILE = "recollect.db"
CHECKPOINT_FILE = "checkpoints.sqlite"


def readable_data_dir(data_dir: str | Path) -> Path:
    """`data_dir` (which may not exist); a `DataDirError` when it is, or lies under, a file."""
    path = Path(data_dir).expanduser()
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        what = "is a file" if blocker == path else f"lies under {str(blocker)!r}, which is a file"
        raise DataDirError(f"data directory {str(path)!r} {what}, not a directory; choose another with "
                           "--data-dir or RECOLLECT_DATA_DIR")
    return path


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection. A WAL database in a directory nobody may write cannot get its shared-memory
    file; with no write-ahead log left to read it is opened as immutable instead."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError:
        if Path(f"{path}-wal").exists():
            raise
        return sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True, check_same_thread=False)


def _missing_table(exc: sqlite3.OperationalError) -> bool:
    return "no such table" in str(exc)


def _read(path: Path, read: Callable[[Path], Any]) -> Any:
    """`read(path)`, with a damaged file (`file is not a database`) named in a `DataDirError`."""
    try:
        return read(path)
    except sqlite3.DatabaseError as exc:
        raise DataDirError(f"{path}: {exc}") from exc


def _store_kind(path: Path, kind: str, namespace: str = "") -> tuple[dict[str, Any], bool]:
    """The items of `kind` in `namespace` ("": the registry) in the store file, and whether recollect.db was copied into it
    (`migrate_doc_db`'s marker)."""
    with closing(connect_read_only(path)) as conn:
        store = RecollectSqliteStore(conn)
        store.is_setup = True  # its tables exist (or the file holds no registry): nothing to create or migrate
        try:
            docs = StoreDocs(store)
            return docs.items(namespace, kind), docs.get(*_MIGRATION) is not None
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return {}, False
            raise


def _legacy_kind(path: Path, kind: str, namespace: str = "") -> dict[str, Any]:
    with closing(connect_read_only(path)) as conn:
        try:
            rows = conn.execute("SELECT key, value FROM docs WHERE namespace=? AND kind=? ORDER BY rowid",
                                (namespace, kind)).fetchall()
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return {}
            raise
    return {key: json.loads(value) for key, value in rows}


def read_registry(data_dir: str | Path, kind: str, namespace: str = "") -> dict[str, Any]:
    """The data directory's registry items of `kind` ("namespace", "thread") by key, written nowhere; with
    `namespace`, that namespace's documents of `kind` (a build's status)."""
    path = readable_data_dir(data_dir)
    uri = postgres_uri()
    if uri:
        return StoreDocs(postgres_store(uri)).items(namespace, kind)
    found: dict[str, Any] = {}
    backend, copied = document_backend(), False
    if backend == "langgraph" and (path / STORE_FILE).is_file():
        found, copied = _read(path / STORE_FILE, lambda file: _store_kind(file, kind, namespace))
    # With the store, recollect.db is still read until it has been copied in (the first open to write
    # copies it): its items are listed too, the store's winning. Once copied, it is not: a namespace
    # forgotten since then is gone from the store only.
    if (path / _LEGACY_FILE).is_file() and (backend == "recollect_db" or not copied):
        found = _read(path / _LEGACY_FILE, lambda file: _legacy_kind(file, kind, namespace)) | found
    return found


def read_namespaces(data_dir: str | Path) -> list[NamespaceInfo]:
    """Every namespace the data directory's documents register, by name, written nowhere."""
    found = read_registry(data_dir, "namespace")
    return [NamespaceInfo(**found[name]) for name in sorted(found) if found[name]]


def read_only_checkpointer(data_dir: str | Path) -> Any:
    """A saver that reads the data directory's checkpoints without writing (None: there are none), or the
    shared Postgres saver (RECOLLECT_POSTGRES_URI)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from recollect.memory.backends import postgres_saver

    uri = postgres_uri()
    if uri:
        return postgres_saver(uri)
    path = readable_data_dir(data_dir) / CHECKPOINT_FILE
    if not path.is_file():
        return None
    conn = _read(path, connect_read_only)
    try:
        conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchall()
    except sqlite3.OperationalError as exc:
        conn.close()
        if _missing_table(exc):
            return None
        raise DataDirError(f"{path}: {exc}") from exc
    saver = SqliteSaver(conn)
    saver.is_setup = True  # the tables are there; setting them up would write
    # a file from before LangGraph added the column is read without it, as its own setup would
    saver._has_task_path = "task_path" in {row[1] for row in conn.execute("PRAGMA table_info(writes)")}
    return saver
