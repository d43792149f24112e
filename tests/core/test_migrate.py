"""Upgrading a data directory from recollect.db to the LangGraph store: every document and cache entry
is copied once, in order, without calling the model (automatically when the store backend opens it, or
with `recollect migrate`), and the copy answers and re-ingests exactly as the original did."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from recollect.cli import main
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.docstore import DocStore, use_wal
from recollect.memory.store_docs import ROOT, StoreDocs
from recollect.memory.workspace import DataDirError, Workspace, migrate_data_dir, register_workspace
from recollect.runner import ask, forget, open_checkpointer
from tests.helpers import make_conversation
from tests.methods.hymem.test_ingest import SESSIONS, per_turn_summaries

CONV = make_conversation(SESSIONS)


def _answering(data_dir: str) -> AllMethodsContext:
    return AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default={"answer": "Pixel", "supports": ["D1:1"]}))


def _no_model(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("the model was called")


def _old_data_dir(data_dir: str) -> dict[tuple[str, str], dict[str, Any]]:
    """A data directory written with recollect.db: two namespaces, HyMem's LLM cache, a thread. Returns
    its documents by (namespace, kind), in recollect.db's order."""
    ws = register_workspace(Workspace(data_dir, doc_store="recollect_db"))
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default=per_turn_summaries))
    for ns in ("alice", "a.b"):
        ingest_conversation(CONV, ns, ctx, methods=["memr3", "hymem"], ws=ws)
    ask("alice", "What is Ann's cat called?", "rag", _answering(data_dir), checkpointer=open_checkpointer(data_dir),
        thread_id="t1")
    assert isinstance(ws.docs, DocStore) and ws.docs.cache_rows()
    return _by_kind(ws.docs)


def _by_kind(docs: DocStore) -> dict[tuple[str, str], dict[str, Any]]:
    groups: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
    for ns, kind, key, value in docs.rows():
        groups[(ns, kind)].pop(key, None)  # a rewritten row moves last, as items() orders it
        groups[(ns, kind)][key] = value
    return dict(groups)


def _store_items(docs: StoreDocs) -> list[tuple[tuple[str, ...], str, Any]]:
    return sorted((tuple(i.namespace), i.key, i.value) for i in docs.store.search((ROOT,), limit=1_000_000))


def test_opening_with_the_store_copies_everything_once(data_dir: str) -> None:
    before = _old_data_dir(data_dir)
    old = DocStore(Path(data_dir) / "recollect.db")
    ws = register_workspace(Workspace(data_dir, doc_store="langgraph"))
    docs = ws.docs
    assert isinstance(docs, StoreDocs)
    for (ns, kind), items in before.items():
        assert docs.items(ns, kind) == items and list(docs.items(ns, kind)) == list(items), (ns, kind)
    assert docs.namespaces() == old.namespaces() == ["a.b", "alice"]
    assert all(docs.cache_get(key) == value for key, value in old.cache_rows())
    assert docs.get("", "thread", "t1") == "rag"

    # The copy answers, and rebuilding HyMem's sessions calls no model: the LLM cache came along.
    docs.delete_kind("alice", "hymem_session")
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default=_no_model))
    reports = ingest_conversation(CONV, "alice", ctx, methods=["memr3", "hymem"], ws=ws)
    hymem = next(r for r in reports if r.method == "hymem")
    assert all(r.llm_calls == 0 for r in reports) and hymem.cached_calls == len(SESSIONS)
    answered = _answering(data_dir)
    assert ask("a.b", "What is Ann's cat called?", "rag", answered)["answer"] == "Pixel"

    # Idempotent: opening again, or `migrate_data_dir`, copies nothing; a forgotten namespace stays forgotten.
    snapshot = _store_items(docs)
    again = migrate_data_dir(data_dir)
    assert again is not None and again.already and _store_items(docs) == snapshot
    forget("alice", answered)
    register_workspace(Workspace(data_dir, doc_store="langgraph"))
    assert StoreDocs(docs.store).namespaces() == ["a.b"] and docs.count("alice", "turn") == 0


def test_cli_migrate(data_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _old_data_dir(data_dir)
    assert main(["--data-dir", data_dir, "migrate"]) == 0
    out = capsys.readouterr().out
    documents = sum(len(items) for items in before.values())
    assert f"migrated {documents} documents" in out and "no model called" in out
    assert main(["--data-dir", data_dir, "migrate"]) == 0
    assert "already migrated" in capsys.readouterr().out
    docs = Workspace(data_dir, doc_store="langgraph").docs
    assert all(docs.items(ns, kind) == items for (ns, kind), items in before.items())

    assert main(["--data-dir", str(tmp_path / "fresh"), "migrate"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out


def test_a_damaged_recollect_db_is_named(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "recollect.db").write_bytes(b"this is not an SQLite database, " * 8)
    with pytest.raises(DataDirError, match=r"recollect\.db: file is not a database"):
        Workspace(data, doc_store="langgraph")
    other = tmp_path / "other"
    other.mkdir()
    (other / "store.sqlite").write_bytes(b"this is not an SQLite database, " * 8)
    with pytest.raises(DataDirError, match=r"store\.sqlite: file is not a database"):
        Workspace(other, doc_store="langgraph")


def test_processes_upgrading_together_copy_once(data_dir: str) -> None:
    import threading

    before = _old_data_dir(data_dir)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(migrate_data_dir(data_dir))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(r.already for r in results) == [False, True, True, True]
    docs = Workspace(data_dir, doc_store="langgraph").docs
    assert all(docs.items(ns, kind) == items for (ns, kind), items in before.items())


class _LockedAtFirst:
    """A connection whose first `locked` statements fail as SQLite fails a journal-mode switch that meets
    another connection's lock: at once, without waiting in its busy handler."""

    def __init__(self, path: Path, locked: int, error: str = "database is locked") -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.locked, self.error, self.statements = locked, error, []

    def execute(self, sql: str) -> sqlite3.Cursor:
        self.statements.append(sql)
        if self.locked:
            self.locked -= 1
            raise sqlite3.OperationalError(self.error)
        return self.conn.execute(sql)


def test_the_wal_switch_waits_out_another_connections_lock(tmp_path: Path) -> None:
    """CI, 2026-11-29: one of four processes upgrading one data directory together failed with "database is
    locked" on the WAL switch (test_processes_upgrading_together_copy_once)."""
    conn = _LockedAtFirst(tmp_path / "a.sqlite", locked=3)
    use_wal(conn)  # type: ignore[arg-type]
    assert conn.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = _LockedAtFirst(tmp_path / "a.sqlite", locked=0)
    use_wal(again)  # type: ignore[arg-type]
    assert again.statements == ["PRAGMA journal_mode"]  # already WAL: no switch, no lock to wait for
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):  # any other error at once
        use_wal(_LockedAtFirst(tmp_path / "b.sqlite", locked=1, error="disk I/O error"))  # type: ignore[arg-type]
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # and the wait ends
        use_wal(_LockedAtFirst(tmp_path / "c.sqlite", locked=10**6), timeout=0.2)  # type: ignore[arg-type]


def test_the_server_store_upgrades_before_any_graph_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from recollect.memory.backends import server_store
    from recollect.settings import get_settings

    data = tmp_path / "data"
    data.mkdir()
    DocStore(data / "recollect.db").put("demo", "turn", "D1:1", {"speaker": "Ann", "text": "hi"})
    monkeypatch.setenv("RECOLLECT_DATA_DIR", str(data))
    monkeypatch.setenv("RECOLLECT_DOC_STORE", "langgraph")
    get_settings.cache_clear()

    async def listed() -> list[Any]:
        async with server_store() as store:
            return await store.asearch((ROOT, "demo", "turn"))

    try:
        items = asyncio.run(listed())
    finally:
        get_settings.cache_clear()
    assert [(i.key, i.value["text"]) for i in items] == [("D1:1", "hi")]


def test_namespaces_are_listed_before_and_after_the_copy_without_writing(data_dir: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`recollect namespaces` reads the registry read-only (issue 37): from recollect.db while it is not copied
    in, from the store after; a namespace forgotten after the copy stays forgotten."""
    from recollect.memory.read_only import read_namespaces
    from recollect.settings import get_settings

    _old_data_dir(data_dir)
    files = sorted(p.name for p in Path(data_dir).iterdir())
    assert [i.name for i in read_namespaces(data_dir)] == ["a.b", "alice"]  # the store backend, not copied yet
    assert sorted(p.name for p in Path(data_dir).iterdir()) == files  # nothing written, no store.sqlite made
    monkeypatch.setenv("RECOLLECT_DOC_STORE", "recollect_db")
    get_settings.cache_clear()
    try:
        assert [i.name for i in read_namespaces(data_dir)] == ["a.b", "alice"]
    finally:
        monkeypatch.delenv("RECOLLECT_DOC_STORE")
        get_settings.cache_clear()
    migrate_data_dir(data_dir)
    forget("a.b", AllMethodsContext(data_dir=data_dir), ws=register_workspace(Workspace(data_dir)))
    assert [i.name for i in read_namespaces(data_dir)] == ["alice"]
