"""A thread holds a conversation: each new question starts its per-question fields fresh, reads
its question from `question` or from the last human message, and ends with an AI message."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph

from recollect.graphs.registry import METHODS as GRAPHS
from recollect.graphs.registry import AllMethodsContext, load_graph
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.runner import open_checkpointer
from recollect.state import MemoryState
from recollect.steps import fresh_question_fields, per_question_fields, wire_question_lifecycle
from tests.helpers import make_conversation

CONV = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice, my dog is Rex")]])


def _answers(msgs: list[Any], kw: dict[str, Any]) -> Any:
    prompt = "\n".join(str(m.content) for m in msgs)
    name, ids = ("Rex", ["D1:2"]) if "dog" in prompt.split("Question")[-1] else ("Pixel", ["D1:1"])
    return {"answer": name, "supports": ids}


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    ingest_conversation(CONV, "life", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    # follow-up rewriting has its own tests (test_followups.py); here each question is answered as asked
    return AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answers), rewrite_followups=False)


@pytest.mark.parametrize("method", list(GRAPHS))
def test_every_state_key_but_the_thread_keys_is_reset(method: str) -> None:
    schema = load_graph(method).builder.state_schema
    keys = set(per_question_fields(schema))
    assert {"iteration", "masks", "evidence", "gaps", "trace", "usage", "answer", "supports"} <= keys
    own = {k for k in typing.get_type_hints(schema) if k.startswith(("memr3_", "mra_", "hymem_", "mg_"))}
    assert own <= keys
    assert bool(own) == (method not in ("rag", "full_context"))
    assert not keys & {"namespace", "question", "messages"}
    fresh = fresh_question_fields(schema)
    assert fresh["iteration"] == 0 and fresh["evidence"] == [] and fresh["query"] is None
    assert type(fresh["masks"]).__name__ == "Overwrite"  # a reducer key needs Overwrite to empty


@pytest.mark.parametrize("method", ["rag", "full_context"])
def test_two_questions_on_one_thread(ctx: AllMethodsContext, method: str) -> None:
    g = load_graph(method).builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = g.invoke({"namespace": "life", "question": "What is Ann's cat called?"}, config, context=ctx)
    second = g.invoke({"question": "And Bob's dog?"}, config, context=ctx)  # namespace from the thread
    assert first["answer"] == "Pixel" and second["answer"] == "Rex"
    values = g.get_state(config).values
    assert values["question"] == "And Bob's dog?" and values["supports"] == ["D1:2"]
    # per-question fields start fresh: one question's trace and usage, not the sum of both
    assert sum(r["node"].endswith("_answer") for r in values["trace"]) == 1
    assert values["usage"]["calls"] == 1
    conversation = [(type(m).__name__, m.content) for m in values["messages"]]
    assert conversation == [("HumanMessage", "What is Ann's cat called?"), ("AIMessage", "Pixel"),
                            ("HumanMessage", "And Bob's dog?"), ("AIMessage", "Rex")]
    assert values["messages"][-1].response_metadata["supports"] == ["D1:2"]


def test_chat_messages_are_the_question(ctx: AllMethodsContext) -> None:
    g = load_graph("rag").builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "chat"}}
    chat_ctx = ctx.with_overrides(namespace="life")  # Studio's chat view sends only messages
    out = g.invoke({"messages": [HumanMessage("What is Ann's cat called?")]}, config, context=chat_ctx)
    assert out["answer"] == "Pixel" and isinstance(out["messages"][-1], AIMessage)
    out = g.invoke({"messages": [HumanMessage("what about Bob's dog?")]}, config, context=chat_ctx)
    assert out["answer"] == "Rex"
    assert [m.content for m in out["messages"]] == ["What is Ann's cat called?", "Pixel", "what about Bob's dog?", "Rex"]
    # a later explicit question is not mistaken for the already-answered chat message
    out = g.invoke({"question": "Ann's cat?"}, config, context=chat_ctx)
    assert out["answer"] == "Pixel" and out["messages"][-2].content == "Ann's cat?"


def test_missing_question_and_namespace_are_clear_errors(ctx: AllMethodsContext) -> None:
    g = load_graph("rag")
    with pytest.raises(ValueError, match="question is empty"):
        g.invoke({"namespace": "life"}, context=ctx)
    with pytest.raises(ValueError, match="no namespace"):
        g.invoke({"question": "cat?"}, context=ctx)


def test_reset_survives_the_open_checkpointer(ctx: AllMethodsContext) -> None:
    g = load_graph("rag").builder.compile(checkpointer=open_checkpointer(ctx.data_dir))
    config = {"configurable": {"thread_id": "sq"}}
    g.invoke({"namespace": "life", "question": "What is Ann's cat called?"}, config, context=ctx)
    g.invoke({"namespace": "life", "question": "And Bob's dog?"}, config, context=ctx)
    values = g.get_state(config).values
    assert values["masks"] == [t for s in values["retrieved"] for t in s["turn_ids"]]
    assert len(values["messages"]) == 4


def test_several_last_nodes_all_reach_finish_question() -> None:
    builder = StateGraph(MemoryState, context_schema=AllMethodsContext)
    builder.add_node("a", lambda s: {"answer": "A"})
    builder.add_node("b", lambda s: {"answer": "B"})
    builder.add_conditional_edges("a", lambda s: "b" if "b" in s["question"] else "finish_question")
    wire_question_lifecycle(builder, "a", ["b"], "toy")
    g = builder.compile()
    assert g.invoke({"namespace": "x", "question": "go b"})["messages"][-1].content == "B"
    out = g.invoke({"namespace": "x", "question": "stop"})
    assert out["messages"][-1].content == "A" and out["method"] == "toy"
    assert out["cost"] == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "model_seconds": 0.0}



def test_every_registered_graph_is_wired() -> None:
    """Each method's graph starts and ends through the lifecycle nodes, so no thread keeps stale state."""
    for method in GRAPHS:
        graph = load_graph(method).get_graph()
        assert {"start_question", "finish_question"} <= set(graph.nodes), method
        assert {e.target for e in graph.edges if e.source == "__start__"} == {"start_question"}, method
        assert {e.source for e in graph.edges if e.target == "__end__"} == {"finish_question"}, method


@pytest.mark.parametrize("method", list(GRAPHS))
def test_every_graph_binds_a_thread_to_its_namespace(method: str) -> None:
    from recollect.state import BoundNamespace

    assert isinstance(load_graph(method).builder.compile().channels["namespace"], BoundNamespace)


@pytest.mark.parametrize("method", ["rag", "memr3"])
def test_a_thread_keeps_its_first_namespace_whoever_writes(data_dir: str, method: str) -> None:
    """Issue 37: `update_state(t, {"namespace": "alice"})` moved a thread, and its next run read alice's memory.
    The graph's `namespace` channel keeps the thread's namespace against every write (an update, also in
    LangGraph's overwrite forms, a command, a run's input, an empty one); a run that names another fails in
    `start_question` and leaves the thread as usable as before."""
    from langgraph.types import Command, Overwrite

    from recollect.state import NamespaceBindingError

    model = scripted(default=_answers)
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, rewrite_followups=False)
    ingest_conversation(CONV, "life", ctx, methods=["memr3"])
    ingest_conversation(make_conversation([[("Zed", "my parrot is called Kiwi")]], "other"), "alice", ctx,
                        methods=["memr3"])
    g = load_graph(method).builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"bound-{method}"}}
    g.invoke({"namespace": "life", "question": "What is Ann's cat called?"}, config, context=ctx)
    for update in ({"namespace": "alice"}, {"namespace": Overwrite("alice")}, {"namespace": {"__overwrite__": "alice"}},
                   {"namespace": {"type": "__overwrite__", "value": "alice"}}, {"namespace": ["alice"]}, {"namespace": ""}):
        g.update_state(config, update)
        assert g.get_state(config).values["namespace"] == "life", update
    refused = [({"namespace": "alice", "question": "Bob's dog?"}, ctx),
               (Command(update={"namespace": "alice"}), ctx),
               ({"namespace": 7, "question": "Bob's dog?"}, ctx)]
    for given, run_ctx in refused:
        with pytest.raises(NamespaceBindingError, match="reads namespace 'life' and cannot switch to 'alice'|string"):
            g.invoke(given, config, context=run_ctx)
        assert g.get_state(config).values["namespace"] == "life"
    model.calls.clear()
    out = g.invoke({"namespace": "", "question": "And Bob's dog?"}, config, context=ctx.with_overrides(namespace="alice"))
    assert out["answer"] == "Rex" and g.get_state(config).values["namespace"] == "life"
    prompts = "\n".join(model.prompts())
    assert "Kiwi" not in prompts and "Rex" in prompts, prompts[:500]


def test_the_cli_refuses_another_namespace_on_a_thread(data_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    from recollect.runner import ThreadError, ask

    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answers), rewrite_followups=False)
    for ns in ("life", "alice"):
        ingest_conversation(CONV, ns, ctx, methods=["memr3"])
    saver = open_checkpointer(data_dir)
    try:
        ask("life", "What is Ann's cat called?", "rag", ctx, checkpointer=saver, thread_id="t9")
        with pytest.raises(ThreadError, match=r"thread 't9' reads namespace 'life' and cannot switch to 'alice'"):
            ask("alice", "What is Ann's cat called?", "rag", ctx, checkpointer=saver, thread_id="t9")
    finally:
        saver.conn.close()
