"""`vector_store=`: a LangChain VectorStore the user keeps, filled by `ingest(..., vector_store=)` and read
by memr3 and rag through its own `as_retriever`; the methods with memories of their own refuse it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from recollect import ask, create_graph, create_memr3_graph, create_rag_graph, ingest
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation

CONV = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "my dog is Rex")],
                          [("Ann", "I moved to Bergen last spring"), ("Bob", "I work at the bakery")]])
SHOWN = re.compile(r"\[(D\d+:\d+)\][^\n]*cat is called (\w+)")


def reader(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Answers the cat's name only when a shown turn holds it, citing that turn."""
    title = kwargs["response_format"]["schema"]["title"]
    found = SHOWN.search(re.sub(r"(?m)^Question: .*$", "", str(messages[-1].content)))  # any layout
    answer, cited = (found.group(2), [found.group(1)]) if found else ("No information available", [])
    if title.startswith("RouterDecision"):
        return {"evidence": [f"[{cited[0]}] the cat is {answer}"] if cited else [], "gaps": [],
                "decision": "answer", "detailed_answer": answer}
    return {"answer": answer, "supports": cited}


@pytest.fixture
def store() -> InMemoryVectorStore:
    return InMemoryVectorStore(HashEmbeddings())


def test_ingest_fills_the_users_store_with_one_document_per_turn(store: InMemoryVectorStore, data_dir: str) -> None:
    reports = ingest(CONV, "alice", vector_store=store, data_dir=data_dir)
    assert [(r.method, r.sessions, r.embedded) for r in reports] == [("vector_store", 2, 4)]
    doc = store.get_by_ids(["D1:1"])[0]
    assert doc.id == "D1:1" and doc.page_content == "[D1:1] 10:00 am on 1 May, 2023 | Ann: my cat is called Pixel"
    assert doc.metadata == {"id": "D1:1", "turn_id": "D1:1", "speaker": "Ann", "date_time": "10:00 am on 1 May, 2023",
                            "session": 1, "namespace": "alice"}
    assert open_workspace(data_dir).docs.namespaces() == []  # no method named: nothing else is built

    again = ingest(CONV, "alice", vector_store=store, data_dir=data_dir)  # ids are the turn ids: no duplicates
    assert again[0].embedded == 4 and len(store.store) == 4


def test_ingest_builds_the_named_methods_besides(store: InMemoryVectorStore, data_dir: str) -> None:
    reports = ingest(CONV, "alice", methods=["memr3"], vector_store=store, data_dir=data_dir)
    assert [r.method for r in reports] == ["vector_store", "turns", "memr3"]
    assert open_workspace(data_dir).docs.namespaces() == ["alice"]


def _final(graph: Any, question: dict[str, Any]) -> dict[str, Any]:
    """The run's final state values (with `retrieved_turn_ids`; its output holds the answer only)."""
    return list(graph.stream(question, stream_mode="values"))[-1]


@pytest.mark.parametrize("make", [create_memr3_graph, create_rag_graph])
def test_memr3_and_rag_answer_from_the_store(make: Any, store: InMemoryVectorStore, data_dir: str) -> None:
    ingest(CONV, "alice", vector_store=store)
    model = ScriptedChatModel(default=reader)
    graph = make(vector_store=store, chat_model=model, data_dir=data_dir)
    out = _final(graph, {"namespace": "alice", "question": "What is Ann's cat called?"})
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]
    assert "D1:1" in out["retrieved_turn_ids"]
    assert open_workspace(data_dir).docs.namespaces() == []  # nothing was read from or written to the data dir's memory


def test_k_comes_from_the_methods_own_setting(store: InMemoryVectorStore, data_dir: str) -> None:
    ingest(CONV, "alice", vector_store=store)
    rag = create_graph("rag", vector_store=store, chat_model=ScriptedChatModel(default=reader), rag_top_k=2,
                       data_dir=data_dir)
    out = _final(rag, {"namespace": "alice", "question": "What is Ann's cat called?"})
    assert len(out["retrieved_turn_ids"]) == 2
    # MemR3 asks for its candidate pool: documents it has shown are dropped after the call, and the
    # next retrieval still has new ones to show.
    memr3 = create_graph("memr3", vector_store=store, memr3_top_k=1, memr3_candidate_k=3, data_dir=data_dir)
    retriever = memr3.kwargs["context"].retriever
    assert retriever.search_kwargs == {"k": 3} and retriever.vectorstore is store


def test_ask_takes_a_vector_store_too(store: InMemoryVectorStore, data_dir: str) -> None:
    ingest(CONV, "alice", vector_store=store)
    out = ask("What is Ann's cat called?", "alice", "rag", vector_store=store,
              chat_model=ScriptedChatModel(default=reader), data_dir=data_dir)
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]


@pytest.mark.parametrize("method", ["mragent", "hymem", "mgretrieval", "full_context"])
def test_methods_with_their_own_memory_refuse_a_vector_store(method: str, store: InMemoryVectorStore) -> None:
    with pytest.raises(ValueError, match=rf"method '{method}' cannot use vector_store=.*only memr3 and rag"):
        create_graph(method, vector_store=store)
    with pytest.raises(ValueError, match=rf"method '{method}' cannot use vector_store="):
        ask("q", "alice", method, vector_store=store)


def test_a_vector_store_is_checked(store: InMemoryVectorStore) -> None:
    with pytest.raises(ValueError, match="must be a langchain_core VectorStore, got list"):
        create_graph("rag", vector_store=[])
    with pytest.raises(ValueError, match="either retriever= or vector_store="):
        create_graph("memr3", vector_store=store, retriever=store.as_retriever())
