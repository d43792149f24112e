"""One slot per question on the embedded server: `id_slot` by the run's thread id, never sent elsewhere."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import HumanMessage
from langgraph.graph import StateGraph

from recollect.llm.models import _openai


class S(TypedDict, total=False):
    payloads: list[dict[str, Any]]


def payloads_in_run(model: Any, thread: str, calls: int = 2) -> list[dict[str, Any]]:
    def node(state: S) -> S:
        return {"payloads": [model._get_request_payload([HumanMessage("hi")]) for _ in range(calls)]}

    b = StateGraph(S)
    b.add_node("n", node)
    b.set_entry_point("n")
    return b.compile().invoke({}, {"configurable": {"thread_id": thread}})["payloads"]


def slot(payload: dict[str, Any]) -> Any:
    return (payload.get("extra_body") or {}).get("id_slot")


def test_a_runs_calls_share_one_slot_and_runs_take_the_slots_in_turn() -> None:
    model = _openai("http://127.0.0.1:9/v1", "local", "qwen", slots=3)
    runs = [payloads_in_run(model, f"pin-{i}") for i in range(3)]
    slots = [{slot(p) for p in run} for run in runs]
    assert all(len(s) == 1 for s in slots)
    assert sorted(next(iter(s)) for s in slots) == [0, 1, 2]
    assert {slot(p) for p in payloads_in_run(model, "pin-1")} == slots[1]  # the same thread keeps its slot


def test_no_slot_with_one_slot_outside_a_run_or_for_a_remote_endpoint() -> None:
    one = _openai("http://127.0.0.1:9/v1", "local", "qwen", slots=1)
    assert all(slot(p) is None for p in payloads_in_run(one, "pin-x"))
    many = _openai("http://127.0.0.1:9/v1", "local", "qwen", slots=4)
    assert slot(many._get_request_payload([HumanMessage("hi")])) is None
    remote = _openai("https://api.openai.com/v1", "sk-test", "gpt-4o-mini")
    assert all("id_slot" not in str(p) for p in payloads_in_run(remote, "pin-y"))
