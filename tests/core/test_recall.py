"""The `recall` tool and `RecollectRetriever`: the namespace comes from the app (fixed, run config
or runtime context), never from the model; the tool returns the answer and supports only."""

from __future__ import annotations

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

ALICE = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice")]], conv_id="conv-alice")
BOB = make_conversation([[("Ann", "my cat is called Tiger"), ("Bob", "cool")]], conv_id="conv-bob")


def _answer(msgs: list[Any], kw: dict[str, Any]) -> dict[str, Any]:
    prompt = "\n".join(str(m.content) for m in msgs)
    name = "Pixel" if "Pixel" in prompt else "Tiger" if "Tiger" in prompt else "No information available"
    return {"answer": name, "supports": ["D1:1"]}


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    ingest_conversation(ALICE, "alice", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    ingest_conversation(BOB, "bob", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    return AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answer))


def test_the_model_can_only_write_the_question(ctx: AllMethodsContext) -> None:
    tool = create_recall_tool("rag", context=ctx)
    assert set(tool.args) == {"question"}
    out = tool.invoke({"question": "What is Ann's cat called?", "namespace": "bob"},
                      {"configurable": {"user_id": "alice"}})
    assert out == {"answer": "Pixel", "supports": ["D1:1"]}  # the model's "namespace" is ignored


def test_fixed_namespace_and_missing_namespace(ctx: AllMethodsContext) -> None:
    assert create_recall_tool("rag", namespace="bob", context=ctx).invoke({"question": "cat?"})["answer"] == "Tiger"
    with pytest.raises(NamespaceError, match="no namespace"):
        create_recall_tool("rag", context=ctx).invoke({"question": "cat?"})


def _agent(tool: Any, context_schema: Any = None) -> Any:
    """The tool step of an agent: the model's tool call (with a forged namespace) goes through ToolNode."""
    builder = StateGraph(MessagesState, context_schema=context_schema)
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "tools")
    return builder.compile()


CALL = AIMessage(content="", tool_calls=[{"name": "recall", "id": "c1",
                                           "args": {"question": "What is Ann's cat called?", "namespace": "alice"}}])


def test_inside_an_agent_the_config_picks_the_namespace(ctx: AllMethodsContext) -> None:
    out = _agent(create_recall_tool("rag", context=ctx)).invoke(
        {"messages": [CALL]}, {"configurable": {"user_id": "bob"}})
    assert '"answer": "Tiger"' in out["messages"][-1].content or "'answer': 'Tiger'" in out["messages"][-1].content


@dataclass
class AppContext:
    user_id: str


def test_inside_an_agent_the_runtime_context_picks_the_namespace(ctx: AllMethodsContext) -> None:
    out = _agent(create_recall_tool("rag", context=ctx), AppContext).invoke(
        {"messages": [CALL]}, context=AppContext(user_id="bob"))
    content = out["messages"][-1].content
    assert "Tiger" in content and "Pixel" not in content and "trace" not in content


def test_retriever_returns_chunk_documents(ctx: AllMethodsContext) -> None:
    docs = RecollectRetriever(namespace="alice", context=ctx, k=2).invoke("cat")
    assert docs and len(docs) <= 2
    assert all(d.metadata["namespace"] == "alice" and d.metadata["turn_ids"] for d in docs)
    assert "Pixel" in " ".join(d.page_content for d in docs)
    scoped = RecollectRetriever(context=ctx).invoke("cat", {"configurable": {"user_id": "bob"}})
    assert "Tiger" in " ".join(d.page_content for d in scoped) and "Pixel" not in " ".join(d.page_content for d in scoped)


def test_retriever_over_a_method_returns_its_critical_memories(ctx: AllMethodsContext) -> None:
    docs = RecollectRetriever(namespace="alice", method="rag", context=ctx).invoke("What is Ann's cat called?")
    assert [d.id for d in docs] == ["D1:1"] and "Pixel" in docs[0].page_content


def test_namespace_templates_are_filled_from_the_run(ctx: AllMethodsContext) -> None:
    from recollect.scoping import fill_namespace

    run = {"configurable": {"user_id": "alice", "org": "acme"}}
    assert fill_namespace("{user_id}", run) == "alice" and fill_namespace("alice", None) == "alice"
    assert fill_namespace(("memories", "{org}", "{user_id}"), run) == "memories/acme/alice"
    assert fill_namespace("team-{org}-{{x}}", run) == "team-acme-{x}"  # doubled braces are literal
    with pytest.raises(NamespaceError, match="needs 'user_id'"):
        fill_namespace("{user_id}", {"configurable": {"org": "acme"}})
    with pytest.raises(NamespaceError, match="plain name"):
        create_recall_tool("rag", namespace="{user_id!r}", context=ctx)
    tool = create_recall_tool("rag", namespace=("{who}",), context=ctx)
    assert tool.invoke({"question": "cat?"}, {"configurable": {"who": "bob"}})["answer"] == "Tiger"


def test_the_recall_node_reads_the_runs_namespace_only(ctx: AllMethodsContext) -> None:
    from langchain_core.messages import HumanMessage

    from recollect.recall import create_recall_node

    state = {"messages": [HumanMessage("What is Ann's cat called?")]}
    snippets = create_recall_node(namespace="{user_id}", context=ctx)(state, {"configurable": {"user_id": "alice"}})
    texts = " ".join(m["text"] for m in snippets["recall"]["memories"])
    assert "Pixel" in texts and "Tiger" not in texts and snippets["recall"]["answer"] == ""
    answered = create_recall_node("rag", namespace="{user_id}", context=ctx)(state, {"configurable": {"user_id": "bob"}})
    assert answered["recall"]["answer"] == "Tiger" and answered["recall"]["supports"] == ["D1:1"]
    nobody = create_recall_node(namespace="{user_id}", context=ctx)(state, {"configurable": {"user_id": "new-user"}})
    assert nobody["recall"]["memories"] == []  # a user with no memory yet recalls nothing, no error


def test_a_graph_as_a_tool_asks_for_the_question_and_returns_the_answer(ctx: AllMethodsContext) -> None:
    from recollect import create_graph

    graph = create_graph("rag", namespace="alice", data_dir=ctx.data_dir, chat_model=ctx.chat_model)
    tool = graph.as_tool(name="ask_memory", description="Ask the user's memory")
    assert set(tool.args) == {"question"}
    assert tool.tool_call_schema.model_json_schema()["required"] == ["question"]
    out = tool.invoke({"question": "What is Ann's cat called?"})
    assert set(out) == {"answer", "supports", "method", "cost", "messages"}
    assert out["answer"] == "Pixel" and out["method"] == "rag" and out["cost"]["calls"] == 1
    # chat input still works, and a run's namespace input is still honoured
    chat = graph.invoke({"namespace": "bob", "messages": [{"role": "user", "content": "What is Ann's cat called?"}]})
    assert chat["answer"] == "Tiger"
