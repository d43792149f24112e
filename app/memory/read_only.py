"""A data directory's namespace registry, read without writing anything (`recollect namespaces`).

`open_workspace` opens a data directory to write: it creates it, checks that it is writable and sets up
the stores' tables, so a read-only data directory (a mounted backup, another user's files) is refused.
Listing namespaces needs none of that: the files are opened read-only and a missing one lists nothing, so
the command works on a read-only data directory and creates nothing in a fresh one.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from recollect.memory.backends import document_backend, postgres_store, postgres_uri
from recollect.memory.store_docs import _MIGRATION, STORE_FILE, RecollectSqliteStore, StoreDocs
from recollect.memory.workspace import DataDirError, NamespaceInfo

_LEGACY_FILE = "recollect.db"


def readable_data_dir(data_dir: str | Path) -> Path:
    """`data_dir` (which may not exist); a `DataDirError` when it is, or lies under, a file."""
    path = Path(data_dir).expanduser()
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        what = "is a file" if blocker == path else f"lies under {str(blocker)!r}, which is a file"
        raise DataDirError(f"data directory {str(path)!r} {what}, not a directory; choose another with "
                           "--data-dir or RECOLLECT_DATA_DIR")
    return path


def _connect_read_only(path: Path) -> sqlite3.Connection:
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


def _store_registry(path: Path) -> tuple[dict[str, dict], bool]:
    """The store file's registry, and whether recollect.db was copied into it (`migrate_doc_db`'s marker)."""
    with closing(_connect_read_only(path)) as conn:
        store = RecollectSqliteStore(conn)
        store.is_setup = True  # its tables exist (or the file holds no registry): nothing to create or migrate
        try:
            docs = StoreDocs(store)
            found = {name: docs.get("", "namespace", name) for name in docs.namespaces()}
            return found, docs.get(*_MIGRATION) is not None
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}, False
            raise


def _legacy_registry(path: Path) -> dict[str, dict]:
    with closing(_connect_read_only(path)) as conn:
        try:
            rows = conn.execute("SELECT key, value FROM docs WHERE namespace='' AND kind='namespace' "
                                "ORDER BY rowid").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
    return {key: json.loads(value) for key, value in rows}


def read_namespaces(data_dir: str | Path) -> list[NamespaceInfo]:
    """Every namespace the data directory's documents register, by name, written nowhere."""
    path = readable_data_dir(data_dir)
    uri = postgres_uri()
    found: dict[str, dict] = {}
    try:
        if uri:
            docs = StoreDocs(postgres_store(uri))
            found = {name: docs.get("", "namespace", name) for name in docs.namespaces()}
        else:
            backend, copied = document_backend(), False
            if backend == "langgraph" and (path / STORE_FILE).is_file():
                found, copied = _store_registry(path / STORE_FILE)
            # With the store, recollect.db is still read until it has been copied in (the first open to write
            # copies it): its namespaces are listed too, the store's entry winning. Once copied, it is not: a
            # namespace forgotten since then is gone from the store only.
            if (path / _LEGACY_FILE).is_file() and (backend == "recollect_db" or not copied):
                found = _legacy_registry(path / _LEGACY_FILE) | found
    except sqlite3.DatabaseError as exc:
        raise DataDirError(f"{path}: {exc}") from exc
    return [NamespaceInfo(**found[name]) for name in sorted(found) if found[name]]
