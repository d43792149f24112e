"""The document-store contract, on both backends: `DocStore` (recollect.db) and `StoreDocs` on LangGraph's
SQLite store (store.sqlite). Same values, same order, namespace walls, atomic transactions."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recollect.memory.backends import server_store
from recollect.memory.docstore import DocStore
from recollect.memory.store_docs import (
    GLOBAL,
    ROOT,
    RecollectSqliteStore,
    StoreDocs,
    ns_from_label,
    ns_label,
    open_store_docs,
)
from recollect.memory.workspace import NAMESPACE_MAX_CHARS, Workspace

BACKENDS = ("recollect_db", "langgraph")
HASH = "0123456789abcdef" * 4
# Names that are prefixes of each other, or would be if '.', ':' or '%' were separators.
WALLED = ("a", "a.b", "a:b", "a%2Eb", "a b", "ab", "%global", "a.b.turn", "Zoë")


def open_backend(backend: str, data_dir: Path) -> DocStore | StoreDocs:
    if backend == "recollect_db":
        return DocStore(data_dir / "recollect.db")
    return open_store_docs(data_dir / "store.sqlite")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def docs(backend: str, tmp_path: Path) -> DocStore | StoreDocs:
    return open_backend(backend, tmp_path)


def test_put_get_and_values_as_json(docs: DocStore | StoreDocs) -> None:
    docs.put("ns", "turn", "D1:1", {"speaker": "Ann", "text": "hi", "img_urls": ("x",), "n": {1: "one"}})
    assert docs.get("ns", "turn", "D1:1") == {"speaker": "Ann", "text": "hi", "img_urls": ["x"], "n": {"1": "one"}}
    assert docs.get("ns", "turn", "D9:9") is None and docs.get("ns", "turn", "D9:9", 7) == 7
    for key, value in {"list": [1, "a"], "str": "s", "int": 3, "none": None, "value": {"value": 1},
                       "seq": {"_seq": 1, "_wrapped": True}, "empty": {}}.items():
        docs.put("ns", "misc", key, value)
        assert docs.get("ns", "misc", key, "absent") == value
    docs.put("ns", "turn", "D1:1", {"text": "replaced"})
    assert docs.get("ns", "turn", "D1:1") == {"text": "replaced"}


def test_a_returned_value_is_a_copy(docs: DocStore | StoreDocs) -> None:
    value = {"built": {"memr3": 1}}
    docs.put("", "namespace", "ns", value)
    value["built"]["hymem"] = 2
    docs.get("", "namespace", "ns")["built"]["rag"] = 3
    assert docs.get("", "namespace", "ns") == {"built": {"memr3": 1}}


def test_a_value_read_inside_a_transaction_is_a_copy(docs: DocStore | StoreDocs) -> None:
    with docs.transaction():
        docs.put("", "namespace", "ns", {"built": {"memr3": 1}})
        docs.get("", "namespace", "ns")["built"]["hymem"] = 2
        docs.items("", "namespace")["ns"]["built"]["rag"] = 3
    assert docs.get("", "namespace", "ns") == {"built": {"memr3": 1}}


def test_items_and_keys_keep_the_order_of_the_last_write(docs: DocStore | StoreDocs) -> None:
    docs.put_many("ns", "k", {"c": 1, "a": 2, "b": 3})
    docs.put("ns", "k", "z", 4)
    docs.put("ns", "k", "c", 5)  # rewritten: moves last, as recollect.db's rowid does
    assert docs.keys("ns", "k") == ["a", "b", "z", "c"]
    assert docs.items("ns", "k") == {"a": 2, "b": 3, "z": 4, "c": 5}
    assert list(docs.items("ns", "k")) == ["a", "b", "z", "c"]
    assert docs.count("ns", "k") == 4 and docs.count("ns", "other") == 0 and docs.items("ns", "other") == {}


def test_delete_and_delete_kind(docs: DocStore | StoreDocs) -> None:
    docs.put_many("ns", "k", {"a": 1, "b": 2})
    docs.put_many("ns", "j", {"a": 1})
    docs.delete("ns", "k", "a")
    docs.delete("ns", "k", "never")
    assert docs.items("ns", "k") == {"b": 2}
    docs.delete_kind("ns", "k")
    assert docs.count("ns", "k") == 0 and docs.items("ns", "j") == {"a": 1}


def test_registry_cache_and_delete_namespace(docs: DocStore | StoreDocs) -> None:
    for ns in ("bob", "alice"):
        docs.put("", "namespace", ns, {"name": ns})
        docs.put_many(ns, "turn", {"D1:1": {"text": ns}, "D1:2": {"text": ns}})
        docs.cache_put(f"{ns}:{HASH}", {"ok": True, "value": ns})
    docs.cache_put(HASH, {"legacy": True})  # a key written before keys named their namespace
    docs.put("", "thread", "t1", "memr3")
    assert docs.namespaces() == ["alice", "bob"]
    assert docs.cache_get(f"alice:{HASH}") == {"ok": True, "value": "alice"} and docs.cache_get(HASH) == {"legacy": True}
    assert docs.cache_get(f"carol:{HASH}") is None
    assert docs.delete_namespace("alice") == 4  # two turns, the registry entry, the cache entry
    assert docs.namespaces() == ["bob"] and docs.count("alice", "turn") == 0 and docs.cache_get(f"alice:{HASH}") is None
    assert docs.count("bob", "turn") == 2 and docs.cache_get(f"bob:{HASH}") is not None
    assert docs.cache_get(HASH) == {"legacy": True} and docs.get("", "thread", "t1") == "memr3"
    assert docs.delete_namespace("alice") == 0
    with pytest.raises(ValueError, match="registry"):
        docs.delete_namespace("")


def test_namespace_walls(docs: DocStore | StoreDocs) -> None:
    for ns in WALLED:
        docs.put("", "namespace", ns, {"name": ns})
        docs.put_many(ns, "turn", {f"{ns}/1": ns, f"{ns}/2": ns})
        docs.put(ns, "mg_state", "vocabulary", {"of": ns})
        docs.cache_put(f"{ns}:{HASH}", ns)
    for ns in WALLED:
        assert set(docs.items(ns, "turn").values()) == {ns} and docs.keys(ns, "turn") == [f"{ns}/1", f"{ns}/2"]
        assert docs.count(ns, "turn") == 2 and docs.get(ns, "mg_state", "vocabulary") == {"of": ns}
        assert docs.cache_get(f"{ns}:{HASH}") == ns
    assert docs.namespaces() == sorted(WALLED)
    for gone in WALLED:
        docs.delete_namespace(gone)
        left = [ns for ns in WALLED if ns != gone]
        assert docs.namespaces() == sorted(left)
        assert all(docs.count(ns, "turn") == 2 and docs.cache_get(f"{ns}:{HASH}") == ns for ns in left), gone
        docs.put("", "namespace", gone, {"name": gone})
        docs.put_many(gone, "turn", {f"{gone}/1": gone, f"{gone}/2": gone})
        docs.cache_put(f"{gone}:{HASH}", gone)


def test_reads_inside_a_transaction_see_its_writes(docs: DocStore | StoreDocs) -> None:
    docs.put_many("ns", "k", {"a": 1, "b": 2, "c": 3})
    with docs.transaction():
        docs.put("ns", "k", "d", 4)
        docs.delete("ns", "k", "b")
        docs.put("ns", "k", "a", 10)
        assert docs.get("ns", "k", "b") is None and docs.get("ns", "k", "a") == 10
        assert docs.keys("ns", "k") == ["c", "d", "a"] and docs.count("ns", "k") == 3
        docs.delete_kind("ns", "k")
        docs.put("ns", "k", "e", 5)
        assert docs.items("ns", "k") == {"e": 5}
        docs.cache_put(f"ns:{HASH}", 1)
        assert docs.cache_get(f"ns:{HASH}") == 1
    assert docs.items("ns", "k") == {"e": 5} and docs.cache_get(f"ns:{HASH}") == 1


def test_a_failed_transaction_changes_nothing(docs: DocStore | StoreDocs) -> None:
    docs.put_many("ns", "k", {"a": 1, "b": 2})
    docs.put("", "namespace", "ns", {"built": {}})
    with pytest.raises(RuntimeError, match="crash"), docs.transaction():
        docs.put_many("ns", "k", {"a": 100, "c": 3})
        docs.delete("ns", "k", "b")
        with docs.transaction():  # nested: joins the outer one
            docs.put("ns", "j", "x", 1)
            docs.delete_namespace("ns")
        raise RuntimeError("crash")
    assert docs.items("ns", "k") == {"a": 1, "b": 2} and docs.count("ns", "j") == 0
    assert docs.namespaces() == ["ns"]


def test_other_threads_do_not_see_a_transaction_before_it_ends(docs: DocStore | StoreDocs) -> None:
    seen: list[Any] = []
    inside, done = threading.Event(), threading.Event()

    def reader() -> None:
        inside.wait(10)
        seen.append(docs.get("ns", "k", "a"))
        done.set()

    thread = threading.Thread(target=reader)
    thread.start()
    with docs.transaction():
        docs.put("ns", "k", "a", 1)
        inside.set()
        done.wait(10)  # WAL: the reader never waits for the writer
    thread.join(10)
    assert seen == [None] and docs.get("ns", "k", "a") == 1


def _add_failing_trigger(backend: str, data_dir: Path) -> None:
    """A write that SQLite refuses half-way through a batch: the store's last INSERT, after its DELETEs."""
    table, key = ("docs", "key") if backend == "recollect_db" else ("store", "key")
    name = "recollect.db" if backend == "recollect_db" else "store.sqlite"
    with sqlite3.connect(data_dir / name) as conn:
        conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} WHEN NEW.{key} = 'boom' "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")


def test_a_batch_that_fails_half_way_is_rolled_back(backend: str, tmp_path: Path) -> None:
    docs = open_backend(backend, tmp_path)
    docs.put_many("ns", "k", {"a": 1, "b": 2})
    _add_failing_trigger(backend, tmp_path)
    with pytest.raises(sqlite3.DatabaseError, match="refused"), docs.transaction():
        docs.delete("ns", "k", "a")
        docs.put("ns", "k", "b", 20)
        docs.put("ns", "k", "boom", 3)
    assert docs.items("ns", "k") == {"a": 1, "b": 2}


_CRASH = """
import os, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.core.test_doc_store_backends import open_backend
docs = open_backend({backend!r}, Path({data!r}))
with docs.transaction():
    docs.put_many("ns", "k", {{"a": 10, "c": 3}})
    docs.delete("ns", "k", "b")
    os._exit(9)  # the process dies inside the build step
"""


def test_a_process_that_dies_inside_a_transaction_leaves_the_old_version(backend: str, tmp_path: Path) -> None:
    docs = open_backend(backend, tmp_path)
    docs.put_many("ns", "k", {"a": 1, "b": 2})
    root = str(Path(__file__).resolve().parents[2])
    code = _CRASH.format(root=root, backend=backend, data=str(tmp_path))
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 9
    assert open_backend(backend, tmp_path).items("ns", "k") == {"a": 1, "b": 2}


def test_a_batch_larger_than_one_insert(backend: str, tmp_path: Path) -> None:
    docs = open_backend(backend, tmp_path)
    if isinstance(docs, StoreDocs):  # a small bound-variable limit, as older SQLite builds have
        docs.store.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 99)
    items = {f"D{i}": {"text": str(i)} for i in range(1000)}
    docs.put_many("ns", "turn", items)
    assert docs.items("ns", "turn") == items
    docs.delete_kind("ns", "turn")
    assert docs.count("ns", "turn") == 0


# --- the LangGraph store's own view


def test_store_items_are_readable_under_recollect_namespaces(tmp_path: Path) -> None:
    docs = open_store_docs(tmp_path / "store.sqlite")
    docs.put("", "namespace", "a@b.com", {"name": "a@b.com"})
    docs.put("a@b.com", "turn", "D1:1", {"speaker": "Ann", "text": "my cat is Pixel", "date_time": "1 May"})
    docs.put("a@b.com", "hymem_summary", "1", [{"id": "1.0", "text": "Ann has a cat"}])
    docs.cache_put(f"a@b.com:{HASH}", {"ok": True})
    store = docs.store
    assert sorted(store.list_namespaces(prefix=(ROOT,))) == [
        (ROOT, GLOBAL, "namespace"), (ROOT, "a@b%2Ecom", "hymem_summary"), (ROOT, "a@b%2Ecom", "llm_cache"),
        (ROOT, "a@b%2Ecom", "turn")]
    turn = store.get((ROOT, "a@b%2Ecom", "turn"), "D1:1")
    assert turn is not None and turn.value["speaker"] == "Ann" and turn.value["text"] == "my cat is Pixel"
    summary = store.get((ROOT, "a@b%2Ecom", "hymem_summary"), "1")
    assert summary is not None and summary.value["value"] == [{"id": "1.0", "text": "Ann has a cat"}]
    assert store.get((ROOT, "a@b%2Ecom", "llm_cache"), HASH) is not None


@given(st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=NAMESPACE_MAX_CHARS))
def test_labels_are_reversible_distinct_and_never_the_reserved_one(namespace: str) -> None:
    label = ns_label(namespace)
    assert ns_from_label(label) == namespace and label != GLOBAL and "." not in label and "\x00" not in label
    assert ns_label(namespace + ".") != label


def test_processes_opening_a_fresh_store_together(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def open_and_write(i: int) -> None:
        try:
            open_store_docs(tmp_path / "store.sqlite").put("ns", "k", str(i), i)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and sorted(open_store_docs(tmp_path / "store.sqlite").keys("ns", "k")) == [str(i) for i in range(6)]


def test_server_store_lists_what_a_workspace_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from recollect.settings import get_settings

    ws = Workspace(tmp_path / "data", doc_store="langgraph")
    ws.docs.put("demo", "turn", "D1:1", {"speaker": "Ann", "text": "hi"})
    monkeypatch.setenv("RECOLLECT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()

    async def listing() -> tuple[list[tuple[str, ...]], list[Any]]:
        async with server_store() as store:
            assert isinstance(store, RecollectSqliteStore)
            return (await store.alist_namespaces(prefix=(ROOT,)),
                    await store.asearch((ROOT, "demo", "turn")))

    try:
        namespaces, items = asyncio.run(listing())
    finally:
        get_settings.cache_clear()
    assert namespaces == [(ROOT, "demo", "turn")] and [i.value["text"] for i in items] == ["hi"]
