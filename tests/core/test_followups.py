"""A follow-up on a thread ("And where does she work?") is rewritten into a standalone question from the
thread's earlier turns before retrieval: one short call, shown in the trace's `rewrite_question` record,
the question as asked kept in `messages`; an unusable reply keeps the question as asked."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from recollect.graphs.registry import AllMethodsContext, load_graph
from recollect.llm.scripted import scripted
from recollect.settings import Context
from recollect.steps import refers_back
from tests.core.sample_memory import ingest_sample, replies

DOG = "What is the name of Maya's dog?"
FOLLOW_UP = "And where does she work?"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("followups"))
    ingest_sample(path)
    return path


def _thread(data: str, model: Any, **settings: Any) -> tuple[Any, AllMethodsContext, dict[str, Any]]:
    ctx = AllMethodsContext(data_dir=data, chat_model=model, **settings)
    return load_graph("rag").builder.compile(checkpointer=InMemorySaver()), ctx, {"configurable": {"thread_id": "f"}}


def _ask(graph: Any, payload: dict[str, Any], config: dict[str, Any], ctx: AllMethodsContext) -> dict[str, Any]:
    """The thread's state after one run (the output schema leaves `question` out)."""
    graph.invoke(payload, config, context=ctx)
    return dict(graph.get_state(config).values)


def _record(trace: list[dict[str, Any]], node: str) -> dict[str, Any]:
    return next(r for r in trace if r["node"] == node)


def test_a_follow_up_is_rewritten_before_retrieval(data: str) -> None:
    model = scripted(default=replies)
    graph, ctx, config = _thread(data, model)
    first = _ask(graph, {"namespace": "sample", "question": DOG}, config, ctx)
    assert first["usage"]["calls"] == 1  # the first question: no rewrite call
    assert all(r["node"] != "rewrite_question" for r in first["trace"])

    out = _ask(graph, {"messages": [HumanMessage(FOLLOW_UP)]}, config, ctx)
    assert out["answer"] == "a bakery"
    rewrite = _record(out["trace"], "rewrite_question")
    assert rewrite["original"] == FOLLOW_UP and rewrite["rewritten"] == "Where does Maya work?"
    assert _record(out["trace"], "retrieve")["query_text"] == "Where does Maya work?"  # what retrieval used
    assert out["question"] == "Where does Maya work?" and out["usage"]["calls"] == 2  # rewrite + answer
    # the rewrite prompt showed the earlier turn, the conversation keeps the question as asked
    assert DOG in model.prompts()[1] and "Biscuit" in model.prompts()[1]
    assert [m.content for m in out["messages"]] == [DOG, "Biscuit", FOLLOW_UP, "a bakery"]


def test_an_invalid_rewrite_keeps_the_question_as_asked(data: str) -> None:
    model = scripted([{"answer": "Biscuit", "supports": []}, "not json", "still not json"], default=replies)
    graph, ctx, config = _thread(data, model)
    graph.invoke({"namespace": "sample", "question": DOG}, config, context=ctx)
    out = _ask(graph, {"question": FOLLOW_UP}, config, ctx)
    rewrite = _record(out["trace"], "rewrite_question")
    assert rewrite["rewritten"] is None and rewrite["fallback"] is True
    assert rewrite["fallback_rule"] == "invalid reply: the question as asked"
    assert _record(out["trace"], "retrieve")["query_text"] == FOLLOW_UP and out["question"] == FOLLOW_UP
    assert out["messages"][-2].content == FOLLOW_UP


def test_a_rewrite_that_drops_the_question_is_refused(data: str) -> None:
    model = scripted([{"answer": "Biscuit", "supports": []}, {"question": "What is Maya's dog called?"}],
                     default=replies)
    graph, ctx, config = _thread(data, model)
    graph.invoke({"namespace": "sample", "question": DOG}, config, context=ctx)
    out = _ask(graph, {"question": FOLLOW_UP}, config, ctx)
    rewrite = _record(out["trace"], "rewrite_question")
    assert rewrite["fallback_rule"].startswith("the rewrite dropped the question's own words")
    assert rewrite["rewrite_reply"] == "What is Maya's dog called?" and out["question"] == FOLLOW_UP


def test_a_standalone_follow_up_and_the_setting_off_make_no_call(data: str) -> None:
    model = scripted(default=replies)
    graph, ctx, config = _thread(data, model)
    graph.invoke({"namespace": "sample", "question": DOG}, config, context=ctx)
    out = _ask(graph, {"question": "Where does Maya work?"}, config, ctx)
    assert out["usage"]["calls"] == 1 and _record(out["trace"], "rewrite_question")["skipped"]

    off, ctx_off, config_off = _thread(data, scripted(default=replies), rewrite_followups=False)
    off.invoke({"namespace": "sample", "question": DOG}, config_off, context=ctx_off)
    out = _ask(off, {"question": FOLLOW_UP}, config_off, ctx_off)
    assert out["usage"]["calls"] == 1 and out["question"] == FOLLOW_UP
    assert all(r["node"] != "rewrite_question" for r in out["trace"])


def test_the_setting_defaults_on_and_the_paper_profile_turns_it_off() -> None:
    assert Context().rewrite_followups is True
    assert Context(profile="paper").rewrite_followups is False
    assert Context(profile="paper", rewrite_followups=True).rewrite_followups is True


@pytest.mark.parametrize(("question", "expected"), [
    ("And where does she work?", True), ("What about Theo?", True), ("Which year?", True),
    ("When did he go there?", True), ("Where does Maya work?", False), ("When did Theo make his first bowl?", True),
    ("What did Maya adopt in March 2023?", False),
])
def test_which_questions_may_refer_back(question: str, expected: bool) -> None:
    assert refers_back(question) is expected


def test_asking_a_rewritten_follow_up_again_on_a_cli_thread_returns_its_answer(data: str, tmp_path: Any) -> None:
    from recollect.runner import ask, open_checkpointer

    model = scripted(default=replies)
    ctx = AllMethodsContext(data_dir=data, chat_model=model)
    saver = open_checkpointer(str(tmp_path))
    ask("sample", DOG, "rag", ctx, checkpointer=saver, thread_id="cli")
    first = ask("sample", FOLLOW_UP, "rag", ctx, checkpointer=saver, thread_id="cli")
    calls = len(model.prompts())
    again = ask("sample", FOLLOW_UP, "rag", ctx, checkpointer=saver, thread_id="cli")
    # the state's `question` is the rewrite; the thread still knows the question as asked
    assert again["answer"] == first["answer"] == "a bakery" and len(model.prompts()) == calls
