"""`forget` deletes every store of one namespace (documents, caches, vectors, its threads) and
nothing of any other; it is idempotent; asking afterwards says the namespace is unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from recollect.cli import main
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.cache import LLMCache, cache_key
from recollect.llm.scripted import scripted
from recollect.memory.store_docs import CACHE_KIND, ROOT, StoreDocs, ns_label
from recollect.memory.workspace import NamespaceError, open_workspace
from recollect.runner import ask, forget, history, open_checkpointer
from tests.helpers import make_conversation

CONV = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice, my dog is Rex")]])


def _setup(data_dir: str) -> AllMethodsContext:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted(default={"answer": "Pixel", "supports": ["D1:1"]}))
    for ns in ("alice", "bob", "alice2"):  # "alice2" shares a prefix with "alice"
        ingest_conversation(CONV, ns, ctx, methods=["memr3"])
        LLMCache(open_workspace(data_dir).docs).put(cache_key(ns, "baselines", "answer", "m", 0.0, {}), {"v": ns})
        ask(ns, "What is Ann's cat called?", "rag", ctx, checkpointer=open_checkpointer(data_dir),
            thread_id=f"thread-{ns}")
    return ctx


def _store_counts(data_dir: str, ns: str) -> tuple[int, int, int]:
    ws = open_workspace(data_dir)
    if isinstance(ws.docs, StoreDocs):  # RECOLLECT_DOC_STORE=langgraph: the items under the namespace's label
        items = ws.docs.store.search((ROOT, ns_label(ns)), limit=1_000_000)
        cache = sum(1 for i in items if i.namespace[2] == CACHE_KIND)
        docs = len(items) - cache
    else:
        conn = ws.docs._conn()
        docs = conn.execute("SELECT COUNT(*) FROM docs WHERE namespace=?", (ns,)).fetchone()[0]
        cache = conn.execute("SELECT COUNT(*) FROM llm_cache WHERE key LIKE ?", (ns + ":%",)).fetchone()[0]
    collections = [c.name for c in ws.client.list_collections() if c.name.split("-", 1)[1] == ns]
    return docs, cache, len(collections)


def test_forget_removes_one_namespace_only(data_dir: str) -> None:
    ctx = _setup(data_dir)
    assert all(n > 0 for n in _store_counts(data_dir, "alice"))
    before_bob = _store_counts(data_dir, "bob")

    removed = forget("alice", ctx)
    assert removed["threads"] == ["thread-alice"] and removed["collections"] >= 2
    assert _store_counts(data_dir, "alice") == (0, 0, 0)
    assert _store_counts(data_dir, "bob") == before_bob
    assert _store_counts(data_dir, "alice2")[0] > 0
    assert "alice" not in open_workspace(data_dir).docs.namespaces()
    with pytest.raises(ValueError, match="no thread 'thread-alice'"):
        history("thread-alice", ctx)
    assert history("thread-bob", ctx)  # other threads keep their checkpoints
    with pytest.raises(NamespaceError, match="never been ingested"):
        ask("alice", "What is Ann's cat called?", "rag", ctx)
    assert ask("bob", "What is Ann's cat called?", "rag", ctx)["answer"] == "Pixel"

    again = forget("alice", ctx)  # idempotent
    assert again["documents"] == 0 and again["collections"] == 0 and again["threads"] == []


def test_forgotten_namespace_can_be_ingested_again(data_dir: str) -> None:
    ctx = _setup(data_dir)
    forget("bob", ctx)
    ingest_conversation(CONV, "bob", ctx, methods=["memr3"])  # no stale collection handle in the cache
    assert ask("bob", "What is Ann's cat called?", "rag", ctx)["supports"] == ["D1:1"]


def test_cli_forget(data_dir: str, capsys: pytest.CaptureFixture[str], sample_path: Path) -> None:
    assert main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", data_dir, "forget", "demo"]) == 0
    assert "forgot namespace 'demo'" in capsys.readouterr().out
    assert main(["--data-dir", data_dir, "forget", "demo"]) == 0  # idempotent
    assert main(["--data-dir", data_dir, "ask", "hi?", "-n", "demo"]) == 2
    assert "never been ingested" in capsys.readouterr().err
    assert main(["--data-dir", data_dir, "forget", "bad\nname"]) == 2
    assert "invalid namespace" in capsys.readouterr().err


def test_forget_graph(data_dir: str) -> None:
    from recollect.graphs.ingest import forget_graph

    ctx = _setup(data_dir)
    out = forget_graph.invoke({"namespace": "bob"}, context=ctx)
    assert out["forgotten"]["threads"] == ["thread-bob"]
    assert "bob" not in open_workspace(data_dir).docs.namespaces()


def test_legacy_cache_entries_are_still_hits(data_dir: str) -> None:
    docs = open_workspace(data_dir).docs
    key = cache_key("ns1", "baselines", "answer", "m", 0.0, {"x": 1})
    docs.cache_put(key.split(":", 1)[1], {"v": 1})  # a key written before the namespace prefix
    assert LLMCache(docs).get(key) == {"v": 1}
    assert docs.cache_get(key) == {"v": 1}  # migrated under the new key, so forget finds it
