"""`remember`: a running chat's newest turns join a namespace's memory at once and idempotently; sessions are
runs of one thread on one day; the builders that call a model run in the background, are retried when they
fail, and say so in `recollect namespaces` and in each question's trace."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from recollect import ask, create_remember_node, remember, wait_for_builds
from recollect.agent_memory import appends, queue, settle
from recollect.cli import main
from recollect.dialogue.chat import chat_turns
from recollect.dialogue.models import DialogueError
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.build_status import statuses
from recollect.memory.chunks import chunk_index
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation
from tests.service.scripted_endpoint import scripted_callable


def _answer(msgs: list[Any], kw: dict[str, Any]) -> Any:
    """Answers from the prompt: the dog's name when a shown turn says it, else the schema's default."""
    prompt = "\n".join(str(m.content) for m in msgs)
    found = re.search(r"dog is called (\w+)", prompt)
    if found and "supports" in prompt:
        return {"answer": found[1], "supports": []}
    return scripted_callable(msgs, kw)


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    return AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answer))


@pytest.fixture(autouse=True)
def _no_retry_pause(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(queue, "RETRY_DELAYS_S", (0.0,))
    yield
    assert wait_for_builds(timeout=60)


def _chat(*pairs: tuple[str, str], prefix: str = "m") -> list[Any]:
    out: list[Any] = []
    for i, (said, reply) in enumerate(pairs):
        out += [HumanMessage(said, id=f"{prefix}{i}h"), AIMessage(reply, id=f"{prefix}{i}a")]
    return out


def test_the_same_messages_twice_add_nothing_and_ids_are_stable(ctx: AllMethodsContext) -> None:
    chat = _chat(("My dog is called Biscuit.", "What a lovely name!"))
    first = remember(chat, "alice", thread_id="t1", context=ctx)
    assert first["added"] == ["D1:1", "D1:2"] and first["sessions"] == [1] and first["skipped"] == 0
    again = remember(chat, "alice", thread_id="t1", context=ctx)
    assert again["added"] == [] and again["skipped"] == 2 and again["queued"] == []
    # the whole history again plus one new exchange: only the new turns, continuing the session
    more = remember([*chat, *_chat(("I work at a bakery.", "Nice."), prefix="n")], "alice", thread_id="t1", context=ctx)
    assert more["added"] == ["D1:3", "D1:4"] and more["skipped"] == 2
    turns = open_workspace(ctx.data_dir).turns("alice")
    assert [(t.id, t.speaker, t.text) for t in turns.values()][:2] == [
        ("D1:1", "User", "My dog is called Biscuit."), ("D1:2", "Assistant", "What a lovely name!")]
    # messages without ids: a digest of thread, position, speaker and text makes the key
    plain = [{"role": "user", "content": "hello"}, ("assistant", "hi there")]
    assert remember(plain, "bob", context=ctx)["added"] == ["D1:1", "D1:2"]
    assert remember(plain, "bob", context=ctx)["added"] == []


def test_sessions_are_runs_of_one_thread_on_one_day(ctx: AllMethodsContext) -> None:
    def said(text: str, when: str, mid: str) -> dict[str, Any]:
        return {"role": "user", "content": text, "timestamp": when, "id": mid}

    assert remember([said("a", "2024-05-08T09:00:00", "1")], "ns", thread_id="A", context=ctx)["sessions"] == [1]
    assert remember([said("b", "2024-05-08T10:00:00", "2")], "ns", thread_id="A", context=ctx)["sessions"] == [1]
    assert remember([said("c", "2024-05-08T10:05:00", "3")], "ns", thread_id="B", context=ctx)["sessions"] == [2]
    assert remember([said("d", "2024-05-08T10:10:00", "4")], "ns", thread_id="A", context=ctx)["sessions"] == [3]
    two_days = [said("e", "2024-05-08T23:50:00", "5"), said("f", "2024-05-09T00:10:00", "6")]
    assert remember(two_days, "ns", thread_id="A", context=ctx)["sessions"] == [3, 4]
    ws = open_workspace(ctx.data_dir)
    assert [[t.id for t in s.turns] for s in ws.sessions("ns")] == [
        ["D1:1", "D1:2"], ["D2:1"], ["D3:1", "D3:2"], ["D4:1"]]
    assert ws.turns("ns")["D4:1"].date_time == "12:10 am on 9 May, 2024"  # each turn keeps its own time
    assert ws.sessions("ns")[0].date_time == "9:00 am on 8 May, 2024"
    # MemR3's chunks follow the sessions: numbered in conversation order, one session each
    chunks = chunk_index(ws, "ns", ctx).all()
    assert sorted((u.id, tuple(u.turn_ids)) for u in chunks) == [
        ("chat:c1", ("D1:1", "D1:2")), ("chat:c2", ("D2:1",)), ("chat:c3", ("D3:1", "D3:2")), ("chat:c4", ("D4:1",))]


def test_speakers_times_and_what_is_not_a_turn() -> None:
    now = datetime(2024, 1, 2, 3, 4)
    messages = [SystemMessage("be nice"), HumanMessage("hi", name="Maya"),
                AIMessage("", tool_calls=[{"name": "recall", "args": {}, "id": "c"}]),
                ToolMessage("42", tool_call_id="c"),
                AIMessage("hello Maya", additional_kwargs={"timestamp": "2024-01-02T03:05:00+00:00"}),
                {"role": "assistant", "content": [{"type": "text", "text": "two"}, {"type": "text", "text": "blocks"}]}]
    turns = chat_turns(messages, thread="t", assistant_name="Bot", now=now)
    assert [(t.speaker, t.text) for t in turns] == [("Maya", "hi"), ("Bot", "hello Maya"), ("Bot", "two blocks")]
    assert turns[0].at == now  # no timestamp: the time it was remembered
    assert turns[1].at == datetime(2024, 1, 2, 3, 5, tzinfo=UTC).astimezone().replace(tzinfo=None)
    with pytest.raises(DialogueError, match="not ISO 8601"):
        chat_turns([{"role": "user", "content": "x", "timestamp": "yesterday"}], thread="t")


def test_a_namespace_from_a_file_is_extended_after_its_sessions(ctx: AllMethodsContext) -> None:
    conv = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice")]], conv_id="file-conv")
    ingest_conversation(conv, "mix", ctx, methods=["memr3"])
    out = remember(_chat(("My dog is called Biscuit.", "ok")), "mix", thread_id="t", context=ctx)
    assert out["added"] == ["D2:1", "D2:2"]
    ws = open_workspace(ctx.data_dir)
    assert ws.namespace_info("mix").conversation_id == "file-conv" and ws.namespace_info("mix").sessions == [1, 2]
    assert {u.id for u in chunk_index(ws, "mix", ctx).all()} == {"file-conv:c1", "file-conv:c2"}


def test_a_question_right_after_remember_reads_the_new_turns(ctx: AllMethodsContext) -> None:
    remember(_chat(("My dog is called Biscuit.", "Lovely.")), "alice", thread_id="t1", context=ctx)
    assert ask("What is my dog called?", "alice", "rag", context=ctx)["answer"] == "Biscuit"
    assert ask("What is my dog called?", "alice", "memr3", context=ctx)["answer"] == "Biscuit"


def test_model_builders_run_in_the_background_and_extend_each_memory(ctx: AllMethodsContext) -> None:
    out = remember(_chat(("My dog is called Biscuit.", "Lovely.")), "alice", thread_id="t1", methods=["hymem"],
                   context=ctx)
    assert out["queued"] == ["turns", "hymem"]
    assert wait_for_builds("alice", timeout=60)
    ws = open_workspace(ctx.data_dir)
    assert ws.namespace_info("alice").built["hymem"]["sessions"] == 1
    assert {name: s["state"] for name, s in statuses(ws, "alice").items()} == {"turns": "done", "hymem": "done"}
    # a later exchange on another thread: a new session, and HyMem's memory follows without being named again
    later = remember(_chat(("I moved to Oslo.", "Exciting!"), prefix="x"), "alice", thread_id="t2", context=ctx)
    assert later["queued"] == ["turns", "hymem"] and later["sessions"] == [2]
    assert wait_for_builds("alice", timeout=60)
    assert ws.namespace_info("alice").built["hymem"]["sessions"] == 2
    assert ws.index("turns", "alice").count() == 4
    assert ask("What is my dog called?", "alice", "hymem", context=ctx)["answer"]


class _Down(Exception):
    """The model endpoint is unreachable."""


def test_a_failing_build_is_retried_shown_and_never_dropped(ctx: AllMethodsContext, capsys: pytest.CaptureFixture[str]) -> None:
    remember(_chat(("My dog is called Biscuit.", "Lovely.")), "alice", thread_id="t1", methods=["hymem"], context=ctx,
             wait=True)
    down = ctx.with_overrides(chat_model=scripted(default=lambda m, k: (_ for _ in ()).throw(_Down("connection refused"))))
    remember(_chat(("I moved to Oslo.", "Exciting!"), prefix="x"), "alice", thread_id="t2", context=down, wait=True)
    ws = open_workspace(ctx.data_dir)
    hymem = statuses(ws, "alice")["hymem"]
    assert hymem["state"] == "failed" and hymem["attempts"] == 2 and "connection refused" in hymem["error"]
    assert ws.index("turns", "alice").count() == 4  # the turns and their vectors are stored all the same
    assert main(["--data-dir", ctx.data_dir, "namespaces"]) == 0
    assert "build hymem: failed (attempt 2" in capsys.readouterr().out
    # a question still answers from what is built, and its trace says the rest is not
    state = ask("What is my dog called?", "alice", "hymem", context=ctx)
    assert state["trace"][0]["node"] == "memory_status" and state["trace"][0]["builds"]["hymem"]["state"] == "failed"
    # the next remember runs it again, with the endpoint back
    remember(_chat(("And I have a cat.", "Two pets!"), prefix="y"), "alice", thread_id="t2", context=ctx, wait=True)
    assert statuses(ws, "alice")["hymem"]["state"] == "done"
    assert ws.namespace_info("alice").built["hymem"]["sessions"] == 2
    assert ask("What is my dog called?", "alice", "hymem", context=ctx)["trace"][0]["node"] != "memory_status"


def test_the_node_takes_namespace_and_thread_from_the_run(ctx: AllMethodsContext) -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("remember", create_remember_node("{user_id}", context=ctx))
    builder.add_edge(START, "remember")
    graph = builder.compile()
    chat = _chat(("My dog is called Biscuit.", "Lovely."))
    graph.invoke({"messages": chat}, {"configurable": {"user_id": "a@b.com", "thread_id": "t9"}})
    graph.invoke({"messages": chat}, {"configurable": {"user_id": "a@b.com", "thread_id": "t9"}})
    assert settle("a@b.com", timeout=30)  # the node handed the turns to the append worker and returned
    ws = open_workspace(ctx.data_dir)
    assert list(ws.turns("a@b.com")) == ["D1:1", "D1:2"]
    assert ws.docs.get("a@b.com", "chat", "tail")["thread"] == "t9"
    with pytest.raises(Exception, match="needs 'user_id'"):
        graph.invoke({"messages": chat}, {"configurable": {"thread_id": "t9"}})
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        create_remember_node("{user_id}", methods=["nope"])


def test_a_failed_background_append_is_recorded_and_its_turns_added_at_the_next_turn(
        ctx: AllMethodsContext, monkeypatch: pytest.MonkeyPatch) -> None:
    import recollect.agent_memory as agent_memory

    remember(_chat(("hello", "hi")), "carol", thread_id="t", context=ctx)
    real = agent_memory.append_chat_turns
    monkeypatch.setattr(agent_memory, "append_chat_turns", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    chat = _chat(("hello", "hi"), ("My dog is called Biscuit.", "Lovely."))
    assert remember(chat, "carol", thread_id="t", context=ctx, background=True)["pending"] is True
    assert appends.APPENDS.settle("carol", timeout=30)
    ws = open_workspace(ctx.data_dir)
    failed = statuses(ws, "carol")["remember"]
    assert failed["state"] == "failed" and "disk full" in failed["error"]
    monkeypatch.setattr(agent_memory, "append_chat_turns", real)
    remember(chat, "carol", thread_id="t", context=ctx, background=True)  # the agent's next turn: whole history
    assert settle("carol", timeout=30)
    assert list(ws.turns("carol")) == ["D1:1", "D1:2", "D1:3", "D1:4"]
    assert statuses(ws, "carol")["remember"]["state"] == "done"
