"""The recall tool and `RecollectRetriever` through `ainvoke`: the same documents and scoping as the
sync path, inside and outside an async agent graph (scripted model)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.workspace import NamespaceError
from recollect.recall import RecollectRetriever, create_recall_tool
from tests.helpers import make_conversation


def _answer(msgs: list[Any], kw: dict[str, Any]) -> dict[str, Any]:
    prompt = "\n".join(str(m.content) for m in msgs)
    name = "Pixel" if "Pixel" in prompt else "Tiger" if "Tiger" in prompt else "No information available"
    return {"answer": name, "supports": ["D1:1"]}


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    for ns, cat in (("alice", "Pixel"), ("bob", "Tiger")):
        conv = make_conversation([[("Ann", f"my cat is called {cat}"), ("Bob", "nice")]], conv_id=f"conv-{ns}")
        ingest_conversation(conv, ns, AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    return AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answer))


def _texts(docs: list[Any]) -> str:
    return " ".join(d.page_content for d in docs)


def test_retriever_ainvoke_matches_invoke(ctx: AllMethodsContext) -> None:
    fixed = RecollectRetriever(namespace="alice", context=ctx, k=2)
    docs = asyncio.run(fixed.ainvoke("cat"))
    assert [d.id for d in docs] == [d.id for d in fixed.invoke("cat")]
    assert "Pixel" in _texts(docs) and all(d.metadata["namespace"] == "alice" for d in docs)
    scoped = asyncio.run(RecollectRetriever(context=ctx).ainvoke("cat", {"configurable": {"user_id": "bob"}}))
    assert "Tiger" in _texts(scoped) and "Pixel" not in _texts(scoped)
    with pytest.raises(NamespaceError, match="no namespace"):
        asyncio.run(RecollectRetriever(context=ctx).ainvoke("cat"))


def test_retriever_over_a_method_ainvoke(ctx: AllMethodsContext) -> None:
    docs = asyncio.run(RecollectRetriever(namespace="alice", method="rag", context=ctx).ainvoke("cat?"))
    assert [d.id for d in docs] == ["D1:1"] and "Pixel" in docs[0].page_content


def test_concurrent_ainvokes_stay_in_their_namespaces(ctx: AllMethodsContext) -> None:
    retriever = RecollectRetriever(context=ctx)

    async def both() -> list[list[Any]]:
        return await asyncio.gather(*(retriever.ainvoke("cat", {"configurable": {"user_id": u}})
                                      for u in ("alice", "bob", "alice", "bob")))

    texts = [_texts(docs) for docs in asyncio.run(both())]
    assert ["Pixel" in t and "Tiger" not in t for t in texts] == [True, False, True, False]


def test_tool_ainvoke(ctx: AllMethodsContext) -> None:
    out = asyncio.run(create_recall_tool("rag", context=ctx).ainvoke(
        {"question": "What is Ann's cat called?", "namespace": "bob"}, {"configurable": {"user_id": "alice"}}))
    assert out == {"answer": "Pixel", "supports": ["D1:1"]}


@dataclass
class AppContext:
    user_id: str


CALL = AIMessage(content="", tool_calls=[{"name": "recall", "id": "c1",
                                           "args": {"question": "What is Ann's cat called?", "namespace": "alice"}}])


def test_inside_an_async_agent_the_runtime_context_picks_the_namespace(ctx: AllMethodsContext) -> None:
    builder = StateGraph(MessagesState, context_schema=AppContext)
    builder.add_node("tools", ToolNode([create_recall_tool("rag", context=ctx)]))
    builder.add_edge(START, "tools")
    out = asyncio.run(builder.compile().ainvoke({"messages": [CALL]}, context=AppContext(user_id="bob")))
    content = out["messages"][-1].content
    assert "Tiger" in content and "Pixel" not in content


def test_retriever_in_an_async_node_reads_the_runtime_context(ctx: AllMethodsContext) -> None:
    retriever = RecollectRetriever(context=ctx)

    async def recall(state: MessagesState) -> dict[str, Any]:
        docs = await retriever.ainvoke("cat")
        return {"messages": [AIMessage(content=_texts(docs))]}

    builder = StateGraph(MessagesState, context_schema=AppContext)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    out = asyncio.run(builder.compile().ainvoke({"messages": []}, context=AppContext(user_id="alice")))
    assert "Pixel" in out["messages"][-1].content and "Tiger" not in out["messages"][-1].content
