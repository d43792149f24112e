"""RECOLLECT_POSTGRES_URI: memories, the LLM cache, the registry and every thread's checkpoints live in one
Postgres database (a real one, started by pgserver), readable by LangGraph's own Postgres classes, by a
second Workspace, by another process and by the server's async store and saver; forget empties one
namespace there and nothing else; a batch that fails half-way writes nothing. Scripted models, hashing
embedder."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import PostgresStore

from recollect.graphs.registry import METHODS, AllMethodsContext, available_builders, load_graph
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.backends import postgres_store, server_store
from recollect.memory.docstore import DocStore
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.postgres import PostgresError, RecollectPostgresStore
from recollect.memory.store_docs import ROOT, StoreDocs, ns_label
from recollect.memory.workspace import Workspace, open_workspace, register_workspace
from recollect.runner import ask, forget, history, open_checkpointer, server_checkpointer
from recollect.settings import get_settings
from tests.core.faults import good_reply
from tests.helpers import make_conversation

REPO = Path(__file__).resolve().parents[2]
CONV = make_conversation([
    [("Ann", "I adopted a dog called Biscuit"), ("Bob", "nice, my cat is Pixel")],
    [("Ann", "Biscuit loves the beach"), ("Bob", "Pixel sleeps all day")],
])
QUESTION = "What is the name of Ann's dog?"  # the scripted answer to a question about a dog: "Biscuit"


def _ctx(data: Path) -> AllMethodsContext:
    return AllMethodsContext(data_dir=str(data), chat_model=ScriptedChatModel(default=good_reply))


def _items(uri: str, namespace: str) -> dict[tuple[str, ...], dict[str, Any]]:
    """Every item under ("recollect", <namespace>), read by LangGraph's own PostgresStore on a new connection."""
    with PostgresStore.from_conn_string(uri) as store:
        found = store.search((ROOT, ns_label(namespace)), limit=1_000_000)
    return {(*item.namespace, item.key): item.value for item in found}


def _checkpoints(uri: str) -> dict[str, int]:
    """Rows per thread across the saver's tables (checkpoints, their blobs and pending writes)."""
    counts: dict[str, int] = {}
    with psycopg.connect(uri) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            for thread, n in conn.execute(f"SELECT thread_id, count(*) FROM {table} GROUP BY thread_id"):
                counts[thread] = counts.get(thread, 0) + n
    return counts


@pytest.fixture
def data(tmp_path: Path, postgres_uri: str) -> Path:
    return tmp_path / "data"


def test_memory_and_threads_live_in_postgres_and_forget_empties_one_namespace(data: Path, postgres_uri: str) -> None:
    first = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    assert isinstance(first.docs, StoreDocs) and isinstance(first.docs.store, RecollectPostgresStore)
    ctx = _ctx(data)
    ingest_conversation(CONV, "alice", ctx, methods=available_builders(), ws=first)
    for ns in ("alice2", "bob"):  # "alice2" extends "alice": no prefix match may reach it
        ingest_conversation(CONV, ns, ctx, methods=["memr3"], ws=first)

    stored = _items(postgres_uri, "alice")
    kinds = {key[2] for key in stored}
    assert {"turn", "session", "llm_cache"} <= kinds, kinds
    assert {v["text"] for k, v in stored.items() if k[2] == "turn"} == {t.text for t in CONV.turns}
    assert not (data / "store.sqlite").exists() and not (data / "checkpoints.sqlite").exists()

    # A second Workspace object, as another process opens the data directory: the same store, every graph answers.
    second = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    assert second is not first and second.docs.store is first.docs.store
    saver = open_checkpointer(str(data))
    for method in METHODS:
        state = ask("alice", QUESTION, method, ctx, checkpointer=saver, thread_id=f"alice-{method}")
        assert state["answer"] == "Biscuit", (method, state["answer"])
    ask("bob", QUESTION, "rag", ctx, checkpointer=saver, thread_id="bob-rag")
    threads = _checkpoints(postgres_uri)
    assert {f"alice-{m}" for m in METHODS} | {"bob-rag"} <= set(threads)
    assert history("alice-rag", ctx)[-1]["answer"] == "Biscuit"
    before = {ns: _items(postgres_uri, ns) for ns in ("alice2", "bob")}

    removed = forget("alice", ctx)
    assert sorted(removed["threads"]) == sorted(f"alice-{m}" for m in METHODS)
    assert removed["documents"] >= len(stored)
    assert _items(postgres_uri, "alice") == {}
    after = _checkpoints(postgres_uri)
    assert not any(thread.startswith("alice-") for thread in after)
    assert after["bob-rag"] == threads["bob-rag"]
    assert {ns: _items(postgres_uri, ns) for ns in ("alice2", "bob")} == before
    assert open_workspace(data).docs.namespaces() == ["alice2", "bob"]
    assert forget("alice", ctx)["threads"] == []  # idempotent


def test_a_cli_ingest_in_another_process_writes_the_database_this_one_reads(
    data: Path, postgres_uri: str, sample_path: Path
) -> None:
    env = {**os.environ, "RECOLLECT_POSTGRES_URI": postgres_uri, "RECOLLECT_EMBEDDER": "hash",
           "ANONYMIZED_TELEMETRY": "False"}
    done = subprocess.run(
        [sys.executable, "-m", "recollect.cli", "--data-dir", str(data), "ingest", str(sample_path),
         "-n", "theo", "--methods", "memr3"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (data / "store.sqlite").exists()
    turns = {k: v for k, v in _items(postgres_uri, "theo").items() if k[2] == "turn"}
    assert any("Biscuit" in v["text"] for v in turns.values())

    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))  # this process, the CLI's data dir
    assert ws.docs.namespaces() == ["theo"] and len(ws.turns("theo")) == len(turns)
    state = ask("theo", "What is the name of Maya's dog?", "rag", _ctx(data),
                checkpointer=open_checkpointer(str(data)), thread_id="theo-1")
    assert state["answer"] == "Biscuit"


def test_a_batch_that_fails_half_way_writes_nothing(postgres_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = StoreDocs(postgres_store(postgres_uri))
    docs.put_many("ns", "turn", {"old": {"text": "kept"}, "gone": {"text": "kept too"}})
    monkeypatch.setattr(RecollectPostgresStore, "_OPS_PER_QUERY", 2)  # several INSERTs, as a large build writes
    # A key psycopg cannot send fails on the client, after the DELETE and the first INSERTs went out:
    # LangGraph's own batch commits those (its pipeline syncs on the way out).
    with pytest.raises(psycopg.DataError), docs.transaction():
        docs.delete("ns", "turn", "gone")
        docs.put_many("ns", "turn", {f"new{i}": {"text": str(i)} for i in range(5)})
        docs.put("ns", "turn", "bad\x00key", {"text": "x"})
    assert docs.items("ns", "turn") == {"old": {"text": "kept"}, "gone": {"text": "kept too"}}


def test_two_processes_creating_the_tables_at_once_both_finish(postgres_uri: str) -> None:
    # Two sessions (as two processes have) set up a fresh database at the same moment: one waits for the
    # other's schema lock, and neither blocks the other's CREATE INDEX CONCURRENTLY.
    from recollect.memory import postgres as pg

    barrier, done, errors = threading.Barrier(2), [], []

    def setup() -> None:
        pool = pg.connection_pool(postgres_uri)
        try:
            barrier.wait(30)
            with pg.schema_lock(pool):
                pg.RecollectPostgresStore(pool).setup()
                pg.RecollectPostgresSaver(pool).setup()
            done.append(True)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            pool.close()

    threads = [threading.Thread(target=setup, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and done == [True, True]


def test_a_large_batch_fits_postgres_parameter_limit(postgres_uri: str) -> None:
    docs = StoreDocs(postgres_store(postgres_uri))
    # LangGraph writes a batch's items in one INSERT of 4 parameters each: 17,000 would bind 68,000
    many = {f"D{i}": {"text": f"turn {i}"} for i in range(17_000)}
    docs.put_many("big", "turn", many)
    assert docs.get("big", "turn", "D0") == many["D0"] and docs.get("big", "turn", "D16999") == many["D16999"]


def test_nul_characters_are_replaced_not_fatal(data: Path, postgres_uri: str) -> None:
    docs = StoreDocs(postgres_store(postgres_uri))
    docs.put("ns", "llm_reply", "k", {"text": "a\x00b", "list": ["\x00"], "\x00": 1})
    assert docs.get("ns", "llm_reply", "k") == {"text": "a\ufffdb", "list": ["\ufffd"], "\ufffd": 1}

    register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = _ctx(data)
    ingest_conversation(CONV, "nul", ctx, methods=["memr3"])
    junk = AllMethodsContext(data_dir=str(data), chat_model=ScriptedChatModel(
        default={"answer": "Bis\x00cuit", "supports": ["D1:1"]}))
    state = ask("nul", QUESTION, "rag", junk, checkpointer=open_checkpointer(str(data)), thread_id="nul-1")
    assert state["answer"] == "Bis\ufffdcuit"


@pytest.fixture
def served_settings(data: Path) -> Iterator[None]:
    before = os.environ.get("RECOLLECT_DATA_DIR")
    os.environ["RECOLLECT_DATA_DIR"] = str(data)
    get_settings.cache_clear()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RECOLLECT_DATA_DIR", None)
        else:
            os.environ["RECOLLECT_DATA_DIR"] = before
        get_settings.cache_clear()


def test_the_servers_store_and_checkpointer_use_the_database(data: Path, postgres_uri: str,
                                                             served_settings: None) -> None:
    register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = _ctx(data)
    ingest_conversation(CONV, "alice", ctx, methods=["memr3"])

    async def serve() -> tuple[list[tuple[str, ...]], list[str]]:
        async with server_store() as store:
            namespaces = await store.alist_namespaces(prefix=(ROOT, "alice"))
            turns = [item.value["text"] for item in await store.asearch((ROOT, "alice", "turn"), limit=100)]
        async with server_checkpointer() as saver:
            assert isinstance(saver, AsyncPostgresSaver)
            graph = load_graph("rag").builder.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "served-1"}}
            await graph.ainvoke({"namespace": "alice", "question": QUESTION}, config, context=ctx)
        return namespaces, turns

    namespaces, turns = asyncio.run(serve())
    assert (ROOT, "alice", "turn") in namespaces and sorted(turns) == sorted(t.text for t in CONV.turns)
    saver = open_checkpointer(str(data))  # the CLI's saver sees the server's thread, and forget removes it
    latest = saver.get_tuple({"configurable": {"thread_id": "served-1", "checkpoint_ns": ""}})
    assert latest is not None and latest.checkpoint["channel_values"]["answer"] == "Biscuit"
    assert forget("alice", ctx)["threads"] == ["served-1"] and "served-1" not in _checkpoints(postgres_uri)


def test_every_data_directorys_recollect_db_is_copied_in_once(tmp_path: Path, postgres_uri: str) -> None:
    # One database holds every data directory's documents, so the copy's marker names the file it copied.
    for name in ("one", "two"):
        DocStore(tmp_path / name / "recollect.db").put(name, "turn", "D1:1", {"text": f"hi from {name}"})
    docs = [Workspace(tmp_path / name, embeddings=HashEmbeddings()).docs for name in ("one", "two")]
    assert [d.get(name, "turn", "D1:1") for d, name in zip(docs, ("one", "two"), strict=True)] == \
        [{"text": "hi from one"}, {"text": "hi from two"}]
    docs[0].delete_namespace("one")
    Workspace(tmp_path / "one", embeddings=HashEmbeddings())  # opened again: a forgotten namespace stays forgotten
    assert docs[0].get("one", "turn", "D1:1") is None


def test_recollect_db_with_a_postgres_uri_is_an_error(tmp_path: Path, postgres_uri: str) -> None:
    with pytest.raises(ValueError, match="RECOLLECT_DOC_STORE=recollect_db.*RECOLLECT_POSTGRES_URI"):
        Workspace(tmp_path / "data", doc_store="recollect_db")


def test_an_unreachable_database_is_named_without_its_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECOLLECT_POSTGRES_URI", f"postgresql://ann:s3cret@/memories?host={tmp_path}/nowhere")
    get_settings.cache_clear()
    try:
        with pytest.raises(PostgresError) as failed:
            Workspace(tmp_path / "data")
    finally:
        monkeypatch.delenv("RECOLLECT_POSTGRES_URI")
        get_settings.cache_clear()
    message = str(failed.value)
    assert "cannot connect to the database memories" in message and "s3cret" not in message
