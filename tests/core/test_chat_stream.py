"""LangGraph's `messages` stream carries the answer only: every graph's internal structured calls
(JSON, tool calls, the follow-up rewrite) are tagged `nostream`, the question the caller sent is not
echoed, and the answer arrives as one AI message from `finish_question` (sync and async)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from recollect.graphs.registry import AllMethodsContext, load_graph, method_context, step_limit
from tests.core.sample_memory import METHODS, ingest_sample, scripted_model


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> AllMethodsContext:
    data = str(tmp_path_factory.mktemp("chat-stream"))
    ingest_sample(data)
    return AllMethodsContext(data_dir=data, namespace="sample")


def _graph(method: str, ctx: AllMethodsContext) -> tuple[Any, Any, dict[str, Any]]:
    own = method_context(method, ctx.with_overrides(chat_model=scripted_model()))
    graph = load_graph(method).builder.compile(checkpointer=InMemorySaver())
    return graph, own, {"configurable": {"thread_id": "t"}, "recursion_limit": step_limit(method, own)}


def _streamed(events: list[tuple[Any, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    return [(type(m).__name__, str(m.content), meta["langgraph_node"]) for m, meta in events]


@pytest.mark.parametrize("method", METHODS)
def test_sync_stream_sends_only_the_answer(ctx: AllMethodsContext, method: str) -> None:
    graph, own, config = _graph(method, ctx)
    events = list(graph.stream({"namespace": "sample", "question": "What is the name of Maya's dog?"}, config,
                               context=own, stream_mode="messages"))
    assert _streamed(events) == [("AIMessage", "Biscuit", "finish_question")]
    assert own.chat_model.calls  # the graph did call the model; none of those replies streamed
    # a chat follow-up on the thread: the rewrite call is internal too, the client's message is not echoed
    events = list(graph.stream({"messages": [HumanMessage("And where does she work?")]}, config, context=own,
                               stream_mode="messages"))
    assert _streamed(events) == [("AIMessage", "a bakery", "finish_question")]
    values = graph.get_state(config).values
    assert [type(m).__name__ for m in values["messages"]] == ["HumanMessage", "AIMessage"] * 2


@pytest.mark.parametrize("method", METHODS)
def test_async_stream_sends_only_the_answer(ctx: AllMethodsContext, method: str) -> None:
    graph, own, config = _graph(method, ctx)

    async def run() -> list[tuple[Any, dict[str, Any]]]:
        return [e async for e in graph.astream({"namespace": "sample", "question": "What is the name of Maya's dog?"},
                                               config, context=own, stream_mode="messages")]

    events = asyncio.run(run())
    assert _streamed(events) == [("AIMessage", "Biscuit", "finish_question")]
    answer = events[0][0]
    assert isinstance(answer, AIMessage) and answer.response_metadata["supports"] == \
        graph.get_state(config).values["supports"]


def test_the_question_is_still_stored_as_a_human_message(ctx: AllMethodsContext) -> None:
    graph, own, config = _graph("rag", ctx)
    graph.invoke({"namespace": "sample", "question": "What is the name of Maya's dog?"}, config, context=own)
    stored = graph.get_state(config).values["messages"]
    assert isinstance(stored[0], HumanMessage) and stored[0].id == graph.get_state(config).values["question_message_id"]
    assert [m.content for m in stored] == ["What is the name of Maya's dog?", "Biscuit"]
