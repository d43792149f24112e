"""Every graph through `ainvoke` and `astream` (its sync nodes run in LangGraph's executor): the same
answers, trace records on the custom stream, threads on the async SQLite checkpointer `recollect serve`
uses, and concurrent questions on two namespaces that each get their own namespace's answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from recollect.graphs.registry import AllMethodsContext, load_graph, method_context, step_limit
from recollect.llm.scripted import scripted
from recollect.runner import checkpoint_path
from tests.core.sample_memory import METHODS, ingest_sample, replies, scripted_model

DOG = "What is the name of Maya's dog?"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("async-graphs"))
    # the same dialogue, a different dog in each (names no prompt template uses)
    ingest_sample(path, "one", replace={"Biscuit": "Waffle"})
    ingest_sample(path, "two", replace={"Biscuit": "Pepper"})
    return path


def _setup(method: str, data: str, **settings: Any) -> tuple[Any, dict[str, Any]]:
    """Method `method`'s context and run config; the default scripted model answers by the question's
    last word ("dog" -> "Biscuit", "work" -> "a bakery"), whatever the namespace holds."""
    settings.setdefault("chat_model", scripted_model())
    ctx = method_context(method, AllMethodsContext(data_dir=data, **settings))
    return ctx, {"recursion_limit": step_limit(method, ctx)}


@pytest.mark.parametrize("method", METHODS)
def test_ainvoke_and_astream(data: str, method: str) -> None:
    ctx, config = _setup(method, data)
    graph = load_graph(method)

    async def run() -> tuple[dict[str, Any], list[tuple[str, Any]]]:
        out = await graph.ainvoke({"namespace": "one", "question": DOG}, config, context=ctx)
        chunks = [c async for c in graph.astream({"namespace": "one", "question": "Where does Maya work?"}, config,
                                                 context=ctx, stream_mode=["custom", "values"])]
        return out, chunks

    out, chunks = asyncio.run(run())
    assert out["answer"] == "Biscuit" and out["messages"][-1].content == "Biscuit"
    records = [c["trace"] for mode, c in chunks if mode == "custom"]
    final = [c for mode, c in chunks if mode == "values"][-1]
    assert final["answer"] == "a bakery"
    assert records and records == final["trace"]  # every node's record reached the stream (context vars hold)


@pytest.mark.parametrize("method", METHODS)
def test_a_thread_on_the_async_sqlite_checkpointer(data: str, method: str) -> None:
    ctx, config = _setup(method, data)

    async def run() -> dict[str, Any]:
        async with AsyncSqliteSaver.from_conn_string(str(checkpoint_path(data))) as saver:
            graph = load_graph(method).builder.compile(checkpointer=saver)
            thread = {**config, "configurable": {"thread_id": f"async-{method}"}}
            await graph.ainvoke({"namespace": "one", "question": DOG}, thread, context=ctx)
            await graph.ainvoke({"messages": [HumanMessage("And where does she work?")]}, thread, context=ctx)
            return dict((await graph.aget_state(thread)).values)

    values = asyncio.run(run())
    assert [m.content for m in values["messages"]] == [DOG, "Biscuit", "And where does she work?", "a bakery"]
    assert values["question"] == "Where does Maya work?"  # the follow-up was rewritten on the async path too


def _by_content(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """The scripted reply, naming the dog the prompt's memory names (so an answer shows what was read)."""
    prompt = "\n".join(str(m.content) for m in messages)
    dog = next((name for name in ("Waffle", "Pepper") if name in prompt), "Biscuit")
    return replies(messages, kwargs).replace("Biscuit", dog)


@pytest.mark.parametrize("method", METHODS)
def test_concurrent_questions_on_two_namespaces(data: str, method: str) -> None:
    ctx_one, config = _setup(method, data, chat_model=scripted(default=_by_content))
    ctx_two, _ = _setup(method, data, chat_model=scripted(default=_by_content))
    graph = load_graph(method)

    async def both() -> list[dict[str, Any]]:
        return await asyncio.gather(*(graph.ainvoke({"namespace": ns, "question": DOG}, config, context=ctx)
                                      for ns, ctx in (("one", ctx_one), ("two", ctx_two))))

    one, two = asyncio.run(both())
    assert (one["answer"], two["answer"]) == ("Waffle", "Pepper")
    # each run's prompts showed its own namespace only
    assert not any("Pepper" in p for p in ctx_one.chat_model.prompts())
    assert not any("Waffle" in p for p in ctx_two.chat_model.prompts())
