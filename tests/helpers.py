"""Small builders shared by unit tests: hand-made conversations and graph runners."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.registry import AllMethodsContext


def make_conversation(sessions: list[list[tuple[str, str]]], conv_id: str = "conv-t", captions: dict[str, str] | None = None) -> Conversation:
    """`sessions` = [[(speaker, text), ...], ...]; turn ids follow LoCoMo's `D<s>:<k>`."""
    captions = captions or {}
    out = []
    for s_idx, turns in enumerate(sessions, start=1):
        date = f"10:00 am on {s_idx} May, 2023"
        built = tuple(
            Turn(id=f"D{s_idx}:{k}", speaker=spk, text=text, session=s_idx, index=k, date_time=date,
                 caption=captions.get(f"D{s_idx}:{k}"))
            for k, (spk, text) in enumerate(turns, start=1)
        )
        out.append(Session(index=s_idx, date_time=date, parsed=None, turns=built))
    return Conversation(id=conv_id, speakers=("Ann", "Bob"), sessions=tuple(out))


def run_graph(compiled: Any, ctx: AllMethodsContext, namespace: str, question: str, recursion_limit: int = 50) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run with an in-memory checkpointer; returns (the final values the run streamed, as `recollect.ask` returns
    them, with trace and usage; the checkpointed state values). A run's own output is narrower: see
    `test_output_is_the_answer_and_its_cost`."""
    g = compiled.builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": recursion_limit}
    out: dict[str, Any] = {}
    for values in g.stream({"namespace": namespace, "question": question}, config, context=ctx, stream_mode="values"):
        out = values
    return dict(out), dict(g.get_state(config).values)


def nodes(trace: list[dict[str, Any]]) -> list[str]:
    return [r["node"] for r in trace]


def stop_process_group(proc: Any, grace_s: float = 30.0) -> None:
    """SIGTERM a server started with `start_new_session=True` (its whole group), SIGKILL it after `grace_s`."""
    import os
    import signal
    import subprocess

    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
