"""Probes of the Python API (`import recollect`): bad dialogues and settings, threads asked to switch their
namespace, model replies that are junk or empty. Scripted models only (`chat_model=`), the hashing embedder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.probes.common import Tally, dialogue

SURFACE = "python"
QUESTION = "What is the cat called?"
# Replies a model may give: every graph must answer (a string) and record its fallback, never raise.
NASTY: dict[str, str] = {
    "empty": "",
    "prose": "I am sorry, I cannot help with that.",
    "wrong schema": '{"foo": [1, 2, 3]}',
    "truncated": '{"answer": "Pes',
    "nested 5,000 deep": "[" * 5000,
    "lone surrogates": '{"answer": "\\ud800 \\udfff", "supports": ["\\udc00"]}',
    "huge": '{"answer": "' + "x" * 100_000 + '"}',
}


def _refuses(call: Callable[[], Any], error: type[BaseException], says: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        try:
            call()
        except error as exc:
            return None if says in str(exc) else f"{type(exc).__name__} without {says!r}: {str(exc)[:200]}"
        return "accepted"
    return probe


def _fallback_never_sticks(data: Path, builder: str) -> Callable[[], str | None]:
    """An ingest whose replies were empty falls back; the next, with a working model, builds again; a third
    makes no call."""
    def probe() -> str | None:
        import recollect
        from recollect.llm.scripted import ScriptedChatModel
        from tests.core.faults import empty_reply, good_model

        def ingest(model: Any) -> Any:
            return recollect.ingest(data / "good.json", builder, methods=[builder], data_dir=str(data), chat_model=model)[-1]

        first = ingest(ScriptedChatModel(default=empty_reply))
        second = ingest(good_model())
        third_model = good_model()
        third = ingest(third_model)
        if not first.fallbacks:
            return "the empty replies left no fallback in the report"
        if second.llm_calls == 0 or second.fallbacks:
            return f"the working model's ingest made {second.llm_calls} calls, fallbacks {second.fallbacks[:2]}"
        return None if third.llm_calls == 0 and not third_model.calls else f"a third ingest made {third.llm_calls} calls"
    return probe


def _thread_probes(tally: Tally, data: Path, model: Any) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    import recollect

    graph = recollect.create_graph("rag", checkpointer=InMemorySaver(), data_dir=str(data), chat_model=model)
    config = {"configurable": {"thread_id": "bound"}}
    graph.invoke({"namespace": "probe", "question": QUESTION}, config)

    def kept(update: dict[str, Any]) -> Callable[[], str | None]:
        def probe() -> str | None:
            graph.update_state(config, update)
            now = graph.get_state(config).values.get("namespace")
            return None if now == "probe" else f"the thread now reads {now!r}"
        return probe

    tally.check(SURFACE, "update_state cannot switch a thread", kept({"namespace": "other"}))
    tally.check(SURFACE, "update_state's overwrite form cannot either", kept({"namespace": {"__overwrite__": "other"}}))
    tally.check(SURFACE, "a run naming another namespace fails", _refuses(
        lambda: graph.invoke({"namespace": "other", "question": QUESTION}, config), ValueError,
        "cannot switch to 'other'"))
    tally.check(SURFACE, "a command naming another namespace fails", _refuses(
        lambda: graph.invoke(Command(update={"namespace": "other"}), config), ValueError, "cannot switch"))

    def usable() -> str | None:
        graph.invoke({"messages": [{"role": "human", "content": QUESTION}]}, config)
        now = graph.get_state(config).values.get("namespace")
        return None if now == "probe" else f"the run read {now!r}"

    tally.check(SURFACE, "the thread is usable after the refusals", usable)


def run(tally: Tally, work: Path) -> None:
    import recollect
    from recollect.dialogue.models import Conversation, DialogueError, Session, Turn
    from recollect.graphs.registry import context_class
    from recollect.llm.scripted import scripted
    from recollect.memory.workspace import NamespaceError, open_workspace
    from tests.service.scripted_endpoint import scripted_callable

    data = work / "api-data"
    data.mkdir(parents=True)
    (data / "good.json").write_text(json.dumps(dialogue()))
    model = scripted(default=scripted_callable)
    settings = {"data_dir": str(data), "chat_model": model}

    def ingested() -> str | None:
        for namespace in ("probe", "other"):
            recollect.ingest(data / "good.json", namespace, methods=["memr3"], **settings)
        return None

    tally.check(SURFACE, "ingest a good dialogue", ingested)
    bad = data / "bad.json"
    bad.write_text(json.dumps(dialogue()).replace("grey", "\\ud800"))
    deep = data / "deep.json"
    deep.write_text("[" * 100_000)
    turn = Turn(id="D1:1", speaker="Ines", text="bad \ud800", session=1, index=1)
    built = Conversation(id="py", speakers=("Ines",), sessions=(Session(1, "", None, (turn,)),))

    def nothing_left(call: Callable[[], Any]) -> Callable[[], str | None]:
        def probe() -> str | None:
            problem = _refuses(call, DialogueError, "holds a lone UTF-16 surrogate")()
            ws = open_workspace(str(data))
            left = [c for c in ws.client.list_collections() if "bad" in (c if isinstance(c, str) else c.name)]
            return problem or ("a vector collection was left" if left else None) or (
                "the registry names it" if "bad" in ws.docs.namespaces() else None)
        return probe

    tally.check(SURFACE, "ingest a file with a lone surrogate", nothing_left(
        lambda: recollect.ingest(bad, "bad", methods=["memr3"], **settings)))
    tally.check(SURFACE, "ingest a Conversation with a lone surrogate", nothing_left(
        lambda: recollect.ingest(built, "bad", methods=["memr3"], **settings)))
    tally.check(SURFACE, "load a dialogue nested 100,000 deep", _refuses(
        lambda: recollect.load_dialogue(deep), DialogueError, "nested more than 64"))
    tally.check(SURFACE, "create_graph with another method's setting", _refuses(
        lambda: recollect.create_graph("memr3", hymem_light_k=3), ValueError, "hymem_light_k"))
    tally.check(SURFACE, "create_graph of an unknown method", _refuses(
        lambda: recollect.create_graph("memr4"), ValueError, "memr4"))
    tally.check(SURFACE, "ask an unknown namespace", _refuses(
        lambda: recollect.ask(QUESTION, "nobody", "rag", **settings), NamespaceError, "never been ingested"))
    tally.check(SURFACE, "ask an empty question", _refuses(
        lambda: recollect.ask("  ", "probe", "rag", **settings), ValueError, "empty"))
    tally.check(SURFACE, "ask with a bad setting value", _refuses(
        lambda: recollect.ask(QUESTION, "probe", "memr3", memr3_max_iterations="abc", **settings), ValueError,
        "memr3_max_iterations"))
    tally.check(SURFACE, "a namespace setting like a@b.com", lambda: None if context_class("rag")(
        namespace="a@b.com").namespace == "a@b.com" else "changed")
    _thread_probes(tally, data, model)
    tally.check(SURFACE, "forget twice", lambda: None if recollect.forget("other", data_dir=str(data))
                and recollect.forget("other", data_dir=str(data))["documents"] == 0 else "the second forget removed more")
    for builder in ("mgretrieval", "mragent", "hymem"):
        tally.check(SURFACE, f"{builder}: a fallback memory never sticks", _fallback_never_sticks(data, builder))
    recollect.ingest(data / "good.json", "probe", **settings)  # every method's memory, for the replies below
    for kind, reply in NASTY.items():
        for method in ("memr3", "rag", "full_context", "mragent", "hymem", "mgretrieval"):
            def answered(method: str = method, reply: str = reply) -> str | None:
                state = recollect.ask(QUESTION, "probe", method, data_dir=str(data), chat_model=scripted(default=reply))
                answer = state.get("answer")
                if not isinstance(answer, str):
                    return f"answer {answer!r}"
                answer.encode()  # a lone surrogate would make it unprintable and unstorable
                return None
            tally.check(SURFACE, f"{method} with a reply that is {kind}", answered)
