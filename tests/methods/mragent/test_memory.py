"""MRAgent's reconstructed context H, render-time masking and the forced answer's evidence (issue 11).

Each test fails on the code before that issue: H was written but never rendered, tools masked every
turn they returned even when the prompt budget hid its text, and the forced answer saw only ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from recollect.graphs.mragent.graph import graph
from recollect.graphs.mragent.seed import in_window, parse_window
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.usage import estimate_tokens
from tests.methods.mragent.fakes import QuestionModel, ingest, ingest_model

Q = "Where did Ann find Pixel?"
SHELTER = "D1:3: Ann: At the Riverside shelter near my flat."
TIME_TEXT = "session date-time 10:00 am on 1 May, 2023"  # only query_conversation_time writes this


def run(ctx: AllMethodsContext, question: str = Q) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    g = graph.builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 60}
    updates: list[tuple[str, dict[str, Any]]] = []
    for chunk in g.stream({"namespace": "ns", "question": question}, config, context=ctx, stream_mode="updates"):
        updates += [(node, upd or {}) for node, upd in chunk.items()]
    return dict(g.get_state(config).values), updates


def nav(calls: list[tuple[str, dict[str, Any]]], keep: list[str] | None = None,
        prune: list[str] | None = None) -> dict[str, Any]:
    return {"mode": "navigate", "calls": [{"tool": t, "args": a} for t, a in calls],
            "keep": keep or [], "prune": prune or []}


def prompts(qm: QuestionModel, start: str) -> list[str]:
    return [p for p in qm.model.prompts() if p.startswith(start)]


def section(prompt: str, title: str) -> str:
    """The text under one heading of the navigate prompt, up to the next blank line."""
    start = next(i for i, line in enumerate(prompt.split("\n")) if line.startswith(title))
    return "\n".join(prompt.split("\n")[start + 1:]).split("\n\n", 1)[0]


@pytest.fixture
def base(data_dir: str) -> AllMethodsContext:
    ctx, _ = ingest(data_dir)
    return ctx


CONTEXT_D1_2 = ("query_event_context", {"event_id": "D1:2", "window": 1})
TIME_D1_3 = ("query_conversation_time", {"event_id": "D1:3"})


@pytest.mark.parametrize("layout", [False, True])
def test_kept_memories_reach_every_later_navigate_prompt(base: AllMethodsContext, layout: bool) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), nav([TIME_D1_3], keep=["D1:3-1"]),
                                 nav([("query_event_context", {"event_id": "D2:1"})]),
                                 {"mode": "answer", "answer": "Riverside shelter", "supports": ["D1:3"]}])
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_prefix_layout=layout))
    navs = prompts(qm, "You answer a question")
    assert len(navs) == 4
    for later in navs[2:]:
        kept = section(later, "Kept memories:")
        assert SHELTER in kept  # full raw text
        # the earlier layout shows them first; the prefix layout after the fixed part and the earlier calls
        assert (later.index("Kept memories:") < later.index("Seed memories:")) is not layout
    assert [m["id"] for m in state["critical_memories"]] == ["D1:3"]


def test_prune_removes_from_h_and_results_not_kept_are_dropped(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), nav([TIME_D1_3], keep=["D1:3"]),
                                 nav([("query_event_context", {"event_id": "D2:1"})], prune=["D1:3"]),
                                 nav([("query_event_context", {"event_id": "D2:3"})]),
                                 {"mode": "answer", "answer": "shelter", "supports": []}])
    run(base.with_overrides(chat_model=qm.model))
    navs = prompts(qm, "You answer a question")
    assert SHELTER in navs[1] and SHELTER in section(navs[2], "Kept memories:")
    assert "Riverside" not in navs[3] and "Riverside" not in navs[4]  # pruned from H, never re-rendered
    # round 3's results (D2:1's neighbour D2:2) were not kept: round 5 lists the call, not the text
    assert "D2:2: Ann: Amazing, I planted tomatoes" in navs[3]
    assert "planted tomatoes" not in navs[4]
    assert 'query_event_context({"event_id": "D2:1"}) -> ids: D2:2' in section(navs[4], "Earlier calls")


def test_native_keep_memories_pseudo_tool_is_applied_and_never_executed(base: AllMethodsContext) -> None:
    from langchain_core.messages import AIMessage

    first = AIMessage(content="", tool_calls=[{"name": "query_event_context", "args": CONTEXT_D1_2[1], "id": "a"}])
    second = AIMessage(content="", tool_calls=[{"name": "keep_memories", "args": {"keep": ["D1:3"]}, "id": "b"},
                                               {"name": "query_conversation_time", "args": TIME_D1_3[1], "id": "c"}])
    qm = QuestionModel(navigate=[first, second, {"mode": "answer", "answer": "Riverside shelter", "supports": []}])
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_tool_protocol="native"))
    assert "keep_memories" in {t.name for t in qm.model.calls[1]["kwargs"]["tools"]}
    assert [e["tool"] for e in state["mra_tool_log"]] == ["query_event_context", "query_conversation_time"]
    assert SHELTER in section(prompts(qm, "You answer a question")[2], "Kept memories:")


def _garden(data_dir: str, n: int = 25) -> AllMethodsContext:
    sessions = [[("Ann" if i % 2 else "Bob", f"garden tomato note number{i} about plants and the weather today")
                 for i in range(1, n + 1)]]
    ctx, _ = ingest(data_dir, sessions=sessions, model=ingest_model(tag_for=lambda tid, text: "garden"))
    return ctx


def test_results_cut_for_room_stay_unmasked_and_the_budget_is_hard(data_dir: str) -> None:
    ctx = _garden(data_dir)
    tag_call = ("query_tag_events", {"cue": "garden", "tag": "garden"})
    qm = QuestionModel(cues={"time_window": "", "cues": [{"cue": "zzz", "alternatives": []}]},
                       navigate=[nav([tag_call]), {"mode": "answer", "answer": "x", "supports": []}])
    state, updates = run(ctx.with_overrides(chat_model=qm.model, max_prompt_tokens=750))
    returned = next(u for n, u in updates if n == "tools")["mra_tool_log"][0]["shown"]
    assert len(returned) == 20
    masked = set(state["masks"])
    second = prompts(qm, "You answer a question")[1]
    assert estimate_tokens(second) <= 750
    shown = {t for t in returned if f"{t}: " in second}
    assert shown and shown == masked & set(returned)  # masked exactly when rendered
    cut = set(returned) - shown
    assert cut and not cut & masked  # the rest stays unmasked, so a later tool can show it again
    nav_rec = [r for r in state["trace"] if r["node"] == "navigate"][1]
    assert set(nav_rec["not_shown_for_room"]) == cut


def test_keeping_a_persona_origin_does_not_mask_it_before_its_text_is_shown(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([("query_personal_aspect", {"person": "Bob", "aspect": "pets"})]),
                                 nav([CONTEXT_D1_2], keep=["D2:1"]),
                                 {"mode": "answer", "answer": "x", "supports": []}])
    _, updates = run(base.with_overrides(chat_model=qm.model))
    route2 = [u for n, u in updates if n == "route"][1]
    assert "masks" not in route2 and [m["id"] for m in route2["critical_memories"]] == ["D2:1"]
    nav3 = [u for n, u in updates if n == "navigate"][2]
    assert "D2:1" in nav3["masks"]  # masked in the round whose prompt shows its raw text
    assert "D2:1: Bob: I ran the Berlin marathon" in prompts(qm, "You answer a question")[2]


def test_forced_answer_sees_h_first_then_derived_tool_text(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), nav([TIME_D1_3], keep=["D1:3"])])
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_max_rounds=3))
    final = prompts(qm, "Answer the question from the memories")
    assert len(final) == 1
    memories = final[0].split("Memories (id: text), kept ones first, then the newest findings:\n", 1)[1]
    assert memories.startswith(SHELTER)
    assert TIME_TEXT in memories  # the time tool's date reaches the forced answer
    assert memories.index(TIME_TEXT) < memories.index("D1:1: Ann: I adopted")  # newest results before the seed
    assert state["mra_forced_final"] is True


def test_unguarded_substring_supports_are_gone(data_dir: str) -> None:
    ctx, _ = ingest(data_dir, sessions=[[("Ann", "I know nothing about Pixel yet"), ("Bob", "Pixel is not here")]])
    qm = QuestionModel(navigate=[{"mode": "answer", "answer": "No", "supports": []}])
    state, _ = run(ctx.with_overrides(chat_model=qm.model), "Did Ann see Pixel?")
    assert state["answer"] == "No" and state["supports"] == []


def test_month_day_window_across_the_year_end() -> None:
    window = parse_window("12-20 01-10")
    assert window == ["12-20", "01-10"]
    assert in_window("2022-12-28", window) and in_window("2023-01-05", window)
    assert not in_window("2023-06-01", window) and not in_window("2023-01-11", window)
    assert parse_window("2023-05-11 2023-05-09") == ["2023-05-09", "2023-05-11"]  # full dates are sorted


def test_month_day_window_across_the_year_end_reaches_the_seed(data_dir: str) -> None:
    sessions = [[("Ann", "We had a party at the lake"), ("Bob", "The lake was frozen")],
                [("Ann", "Summer swim in the lake"), ("Bob", "The lake was warm")]]
    ctx, _ = ingest(data_dir, sessions=sessions,
                    model=ingest_model(time_for=lambda tid: "2022-12-30" if tid.startswith("D1:") else "2023-07-01"))
    qm = QuestionModel(cues={"time_window": "12-20 01-10", "cues": [{"cue": "lake", "alternatives": []}]},
                       navigate=[{"mode": "answer", "answer": "party", "supports": []}])
    state, _ = run(ctx.with_overrides(chat_model=qm.model), "What happened at the lake around new year?")
    assert state["mra_seed"]["path"] == "temporal"
    assert [line.split(": ")[0] for line in state["mra_seed"]["time_events"]] == ["D1:1", "D1:2"]
