"""Stores: masked retrieval, namespace walls, idempotent ingestion, foreign retrievers."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from recollect.graphs.memr3.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.chunks import chunk_index
from recollect.memory.retriever import ExternalRetriever, MaskedRetriever
from recollect.memory.workspace import NamespaceError, open_workspace, validate_namespace
from tests.helpers import make_conversation, run_graph

A = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "my dog is called Rex")]], conv_id="conv-a")
B = make_conversation([[("Cid", "my cat is called Mango"), ("Dee", "my parrot is called Kiwi")]], conv_id="conv-b")


def test_masked_retriever_never_returns_masked_turns(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, memr3_chunk_tokens=5)
    ingest_conversation(A, "a", ctx, methods=["memr3"])
    r = MaskedRetriever(chunk_index(open_workspace(data_dir), "a", ctx), candidate_k=20)
    first = r.retrieve("cat", [], 1)
    rest = r.retrieve("cat", first[0].turn_ids, 5)
    assert first and not set(first[0].turn_ids) & {t for u in rest for t in u.turn_ids}
    assert r.has_unmasked(first[0].turn_ids)
    assert not r.has_unmasked([t.id for t in A.turns])
    assert r.retrieve("cat", [t.id for t in A.turns], 5) == []


def test_namespaces_are_walls(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir)
    ingest_conversation(A, "a", ctx, methods=["memr3"])
    ingest_conversation(B, "b", ctx, methods=["memr3"])
    ws = open_workspace(data_dir)
    assert set(ws.turns("a")) == {"D1:1", "D1:2"}
    texts_a = " ".join(u.text for u in chunk_index(ws, "a", ctx).query("cat called Mango", 10))
    assert "Mango" not in texts_a and "Pixel" in texts_a
    model = scripted([{"evidence": [], "gaps": [], "decision": "answer"}, {"answer": "x", "supports": []}])
    out, state = run_graph(graph, ctx.with_overrides(chat_model=model), "b", "What is the cat called?")
    prompt = "\n".join(model.prompts())
    assert "Mango" in prompt and "Pixel" not in prompt


def test_a_namespace_holds_one_conversation(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir)
    ingest_conversation(A, "a", ctx, methods=["memr3"])
    with pytest.raises(NamespaceError, match="already holds conversation 'conv-a'"):
        ingest_conversation(B, "a", ctx, methods=["memr3"])
    assert set(open_workspace(data_dir).turns("a")) == {"D1:1", "D1:2"}


def test_unknown_and_invalid_namespaces_are_clear_errors(data_dir: str) -> None:
    with pytest.raises(NamespaceError, match="never been ingested"):
        open_workspace(data_dir).require_namespace("ghost")
    for bad in ("", " x", "x ", "x" * 201, "a\nb", "tab\there", "nul\x00"):  # any printable id is valid
        with pytest.raises(NamespaceError, match="invalid namespace"):
            validate_namespace(bad)


def test_incremental_sessions_extend_without_renumbering(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, memr3_chunk_tokens=5)
    one = make_conversation([[("Ann", "hello there")]], conv_id="c")
    two = make_conversation([[("Ann", "hello there")], [("Bob", "new session text")]], conv_id="c")
    ingest_conversation(one, "n", ctx, methods=["memr3"])
    ids_before = {u.id: u.turn_ids for u in chunk_index(open_workspace(data_dir), "n", ctx).all()}
    reports = ingest_conversation(two, "n", ctx, methods=["memr3"])
    after = {u.id: u.turn_ids for u in chunk_index(open_workspace(data_dir), "n", ctx).all()}
    assert all(after[k] == v for k, v in ids_before.items())
    assert reports[1].embedded == 1 and open_workspace(data_dir).namespace_info("n").sessions == [1, 2]


class ListRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager=None) -> list[Document]:  # noqa: ANN001
        return list(self.docs)


def test_memr3_controls_any_langchain_retriever_with_stable_ids(data_dir: str) -> None:
    docs = [Document(page_content="[T1] Zed: I live in Oslo", id="T1"),
            Document(page_content="[T2] Zed: I moved to Bergen", metadata={"id": "T2", "turn_ids": ["T2"]})]
    ext = ExternalRetriever(ListRetriever(docs=docs))
    assert [u.id for u in ext.retrieve("where", ["T1"], 5)] == ["T2"]
    model = scripted([{"evidence": ["[T1] lives in Oslo"], "gaps": ["now?"], "decision": "retrieve"},
                      {"evidence": ["[T1] lived in Oslo"], "gaps": [], "decision": "answer"},
                      {"answer": "Oslo", "supports": ["T1"]}])
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, retriever=ListRetriever(docs=docs), memr3_top_k=1)
    out, state = run_graph(graph, ctx, "ext", "Where does Zed live?")
    assert state["masks"] == ["T1", "T2"]
    assert out["answer"] == "Oslo" and out["supports"] == ["T1"]
