"""MRAgent graph: acceptance behaviours 4–8 and 11–14 (graphs/mragent/README.md), scripted model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from recollect.graphs.mragent.graph import graph
from recollect.graphs.mragent.protocol import parse_reply
from recollect.graphs.mragent.schemas import NavigateJSON
from recollect.graphs.mragent.supports import map_supports
from recollect.graphs.registry import AllMethodsContext
from recollect.memory.workspace import NamespaceError
from recollect.trace import shown_turn_ids as trace_shown_turn_ids
from tests.methods.mragent.fakes import QuestionModel, ingest, ingest_model

Q = "Where did Ann find Pixel?"
ANSWER = {"mode": "answer", "answer": "Riverside shelter", "supports": ["D1:3-1", "D9:99"], "confidence": 0.9}


def run(ctx: AllMethodsContext, question: str = Q) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    g = graph.builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 60}
    updates: list[tuple[str, dict[str, Any]]] = []
    for chunk in g.stream({"namespace": "ns", "question": question}, config, context=ctx, stream_mode="updates"):
        for node, upd in chunk.items():
            updates.append((node, upd or {}))
    return dict(g.get_state(config).values), updates


def of(updates: list[tuple[str, dict[str, Any]]], node: str) -> list[dict[str, Any]]:
    return [u for n, u in updates if n == node]


@pytest.fixture
def base(data_dir: str) -> AllMethodsContext:
    ctx, _ = ingest(data_dir)
    return ctx


def q(ctx: AllMethodsContext, qm: QuestionModel, **kw: Any) -> AllMethodsContext:
    """The spec's graph (no answer rewrite) unless a test turns the rewrite on."""
    return ctx.with_overrides(chat_model=qm.model, **{"mra_answer_rewrite": False, **kw})


# --- 4. temporal path


def _dated(data_dir: str) -> AllMethodsContext:
    sessions = [[("Ann" if i % 2 else "Bob", f"event {i} happened at the lake") for i in range(1, 11)],
                [("Ann", "Another day at home"), ("Bob", "Watching films all evening")]]
    ctx, _ = ingest(data_dir, sessions=sessions,
                    model=ingest_model(time_for=lambda tid: "2023-05-10" if tid.startswith("D1:") else "2023-07-01"))
    return ctx


def test_temporal_path_lists_window_events(data_dir: str) -> None:
    ctx = _dated(data_dir)
    qm = QuestionModel(cues={"time_window": "2023-05-09 2023-05-11", "cues": [{"cue": "lake", "alternatives": []}]},
                       navigate=[ANSWER])
    state, updates = run(q(ctx, qm), "What happened between 9 and 11 May 2023?")
    seed = state["mra_seed"]
    assert seed["path"] == "temporal"
    assert len(seed["time_events"]) == 10 and all("(2023-05-10)" in line for line in seed["time_events"])
    assert seed["key_events"] == [] and seed["topics"] == []
    nav_prompt = next(p for p in qm.model.prompts() if p.startswith("You answer a question"))
    assert "Key events:" not in nav_prompt and "Events in the question's time window:" in nav_prompt


def test_empty_time_window_falls_back_to_main_path(data_dir: str) -> None:
    ctx = _dated(data_dir)
    qm = QuestionModel(cues={"time_window": "2021-01-01 2021-01-31", "cues": [{"cue": "lake", "alternatives": []}]},
                       navigate=[ANSWER])
    state, _ = run(q(ctx, qm))
    assert state["mra_seed"]["path"] == "main" and state["mra_seed"]["time_events"] == []
    assert state["mra_time_window"] == ["2021-01-01", "2021-01-31"]


def test_bad_time_window_becomes_null(base: AllMethodsContext) -> None:
    qm = QuestionModel(cues={"time_window": "sometime in May", "cues": [{"cue": "Pixel", "alternatives": []}]},
                       navigate=[ANSWER])
    state, _ = run(q(base, qm))
    assert state["mra_time_window"] is None


# --- 5. pre-selection


def _many(data_dir: str, n: int) -> AllMethodsContext:
    sessions = [[("Ann" if i % 2 else "Bob", f"garden tomato note number{i}") for i in range(1, n + 1)]]
    ctx, _ = ingest(data_dir, sessions=sessions, model=ingest_model(tag_for=lambda tid, text: "garden"))
    return ctx


CUES_GT = {"time_window": "", "cues": [{"cue": "garden", "alternatives": []}, {"cue": "tomato", "alternatives": []}]}


def test_more_than_k2_candidates_run_pick_and_score_and_show_the_union(data_dir: str) -> None:
    ctx = _many(data_dir, 30)
    pick = {"events": [f"D1:{i}-1" for i in range(1, 6)] + ["D7:7-1"]}
    score = {"scores": {**{f"D1:{i}-1": 0.9 for i in range(4, 10)}, "D1:30-1": 0.0}}
    qm = QuestionModel(cues=CUES_GT, pick=pick, score=score, navigate=[ANSWER])
    state, _ = run(q(ctx, qm, mra_preselect="llm_union", mra_tag_score="llm"), "What about the garden tomato?")
    assert qm.kinds.count("pick") == 1 and qm.kinds.count("score") == 1
    shown = [line.split(":")[0] + ":" + line.split(":")[1] for line in state["mra_seed"]["key_events"]]
    assert sorted(shown) == sorted(f"D1:{i}" for i in range(1, 10))  # union of 1–5 and 4–9; D7:7 ignored
    assert len(shown) <= 40


def test_failed_pick_uses_embedding_top(data_dir: str) -> None:
    ctx = _many(data_dir, 30)
    qm = QuestionModel(cues=CUES_GT, pick="garbage", score={"scores": {"D1:1-1": 1.0}}, navigate=[ANSWER])
    state, _ = run(q(ctx, qm, mra_preselect="llm_union", mra_tag_score="llm"), "What about the garden tomato?")
    assert 20 <= len(state["mra_seed"]["key_events"]) <= 21
    assert any(r.get("fallback") for r in state["trace"] if r["node"] == "seed_pick")


def test_at_most_k2_candidates_make_no_selection_call(data_dir: str) -> None:
    ctx = _many(data_dir, 12)
    qm = QuestionModel(cues=CUES_GT, navigate=[ANSWER])
    state, _ = run(q(ctx, qm), "What about the garden tomato?")
    assert "pick" not in qm.kinds and "score" not in qm.kinds
    assert len(state["mra_seed"]["key_events"]) == 12


def test_many_tags_are_scored_and_strong_tags_expanded(data_dir: str) -> None:
    sessions = [[("Ann", f"garden work number{i}") for i in range(1, 19)]]
    ctx, _ = ingest(data_dir, sessions=sessions, model=ingest_model(tag_for=lambda tid, text: f"tag{tid.split(':')[1]}"))
    qm = QuestionModel(cues={"time_window": "", "cues": [{"cue": "garden", "alternatives": []},
                                                         {"cue": "zzz", "alternatives": []}]},
                       tag_score={"scores": {"tag3": 0.9, "tag5": 0.4, "tag7": 0.0}}, navigate=[ANSWER])
    state, _ = run(q(ctx, qm, mra_preselect="llm_union", mra_tag_score="llm"), "garden?")
    assert qm.kinds.count("tag_score") == 1
    assert state["mra_seed"]["cue_tags"] == ["garden -> tag3, tag5"]
    assert [line.split(": ")[0] for line in state["mra_seed"]["cue_tag_events"]] == ["D1:3"]


def test_with_embedding_tag_ranking_many_tags_make_no_call(data_dir: str) -> None:
    """mra_tag_score=embedding (issue 34): the tags are ranked by their events' similarity to the question, the
    same ranking the tools use; no scoring call, and the trace says which call was skipped."""
    sessions = [[("Ann", f"garden work number{i}") for i in range(1, 19)]]
    ctx, _ = ingest(data_dir, sessions=sessions, model=ingest_model(tag_for=lambda tid, text: f"tag{tid.split(':')[1]}"))
    ctx = ctx.with_overrides(mra_tag_score="embedding")
    qm = QuestionModel(cues={"time_window": "", "cues": [{"cue": "garden", "alternatives": []}]}, navigate=[ANSWER])
    state, _ = run(q(ctx, qm), "garden work number7?")
    assert "tag_score" not in qm.kinds
    record = next(r for r in state["trace"] if r["node"] == "seed_tag_score")
    assert record["ranked_by"] == "embedding" and "mra_tag_score=embedding" in record["skipped_call"]
    assert len(record["kept"]) == ctx.mra_tag_keep and record["kept"][0] == "tag7"  # its event is the question
    assert AllMethodsContext(profile="paper").mra_tag_score == "llm" != AllMethodsContext().mra_tag_score


# --- 6. protocol equivalence


INTENT = [("query_event_context", {"event_id": "D1:2", "window": 1}), ("query_event_keywords", {"event_id": "D2:4-1"})]


def _native() -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": f"x{i}"} for i, (n, a) in enumerate(INTENT)])


def _json_nav() -> str:
    return "Sure:\n```json\n" + json.dumps({"mode": "navigate", "calls": [{"tool": n, "args": a} for n, a in INTENT]}) + "\n```"


def _bare() -> str:
    return "\n".join(json.dumps({"name": n, "arguments": a}) for n, a in INTENT)


def _bare_list() -> str:
    return json.dumps([{"name": n, "arguments": json.dumps(a)} for n, a in INTENT])


def test_protocol_equivalence(base: AllMethodsContext) -> None:
    results = []
    for reply, proto in ((_native(), "native"), (_json_nav(), "json"), (_bare(), "auto"), (_bare_list(), "auto")):
        qm = QuestionModel(navigate=[reply, ANSWER])
        state, updates = run(q(base, qm, mra_tool_protocol=proto))
        pending = of(updates, "route")[0]["mra_pending_calls"]
        after_tools = of(updates, "tools")[0]
        rendered = of(updates, "navigate")[1]  # the results are masked once the next prompt renders them
        results.append((pending, after_tools["mra_tool_log"], sorted(rendered["masks"]), rendered["evidence"],
                        sorted(after_tools["mra_seen_cues"]), state["mra_calls_total"], state["answer"]))
        if proto == "native":
            assert {t.name for t in qm.model.calls[1]["kwargs"]["tools"]} >= {n for n, _ in INTENT}
        if proto == "json":
            assert "response_format" in qm.model.calls[1]["kwargs"] and "tools" not in qm.model.calls[1]["kwargs"]
    assert results[0][0] == [{"call_id": "r1c1", "tool": INTENT[0][0], "args": INTENT[0][1]},
                             {"call_id": "r1c2", "tool": INTENT[1][0], "args": INTENT[1][1]}]
    assert all(r == results[0] for r in results[1:])


def test_parse_reply_forms() -> None:
    assert parse_reply({"content": json.dumps(ANSWER)})["answer"]["answer"] == "Riverside shelter"
    assert parse_reply({"content": "nothing here"})["calls"] == []
    wrapped = json.dumps({"type": "function", "function": {"name": "query_topic_events", "arguments": {"topic": "D1:t1"}}})
    assert parse_reply({"content": wrapped})["calls"] == [{"tool": "query_topic_events", "args": {"topic": "D1:t1"}}]
    assert "navigate" in json.dumps(NavigateJSON.model_json_schema())


# --- 7. caps


TURN_IDS = [f"D1:{i}" for i in range(1, 7)] + [f"D2:{i}" for i in range(1, 5)]


def _ctx_calls(n: int, start: int = 0) -> dict[str, Any]:
    """n distinct calls (10 turns × 5 windows = 50 distinct calls in all)."""
    calls = []
    for k in range(start, start + n):
        calls.append({"tool": "query_event_context", "args": {"event_id": TURN_IDS[k % 10], "window": k // 10 % 5 + 1}})
    return {"mode": "navigate", "calls": calls}


def test_per_round_cap_drops_and_reports(base: AllMethodsContext) -> None:
    twelve = _ctx_calls(12)
    twelve["calls"][10:] = [{"tool": "query_conversation_time", "args": {"event_id": "D2:1"}},
                            {"tool": "query_conversation_time", "args": {"event_id": "D2:2"}}]
    qm = QuestionModel(navigate=[twelve, ANSWER])
    state, updates = run(q(base, qm))
    route1 = of(updates, "route")[0]
    assert len(route1["mra_pending_calls"]) == 10 and len(route1["mra_dropped_calls"]) == 2
    assert all("per-round cap" in d["reason"] for d in route1["mra_dropped_calls"])
    assert state["mra_calls_total"] == 10
    second_nav = [p for p in qm.model.prompts() if p.startswith("You answer")][1]
    assert "Calls not run last round" in second_nav and "query_conversation_time" in second_nav


def test_question_cap_of_50(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate_default=lambda n, prompt: _ctx_calls(10, start=10 * (n - 1)))
    state, updates = run(q(base, qm))
    assert state["mra_calls_total"] == 50 and len(state["mra_tool_log"]) == 50
    assert qm.kinds.count("navigate") == 5 and qm.kinds.count("final") == 1
    assert [n for n, _ in updates][-3:] == ["tools", "answer", "finish_question"]
    assert state["answer"]


def test_question_cap_drops_calls_beyond_the_budget(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[_ctx_calls(10), _ctx_calls(10, start=10)])
    state, updates = run(q(base, qm, mra_max_calls_total=15))
    assert state["mra_calls_total"] == 15
    routes = of(updates, "route")
    assert len(routes[1]["mra_pending_calls"]) == 5 and all("budget" in d["reason"] for d in routes[1]["mra_dropped_calls"])


# --- 8. round budget


def test_always_calling_model_gets_seven_rounds_then_a_forced_answer(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate_default=lambda n, p: _ctx_calls(1, start=n))
    state, updates = run(q(base, qm))
    assert qm.kinds.count("navigate") == 7 and qm.kinds.count("final") == 1
    loop_calls = state["usage"]["by_node"]["navigate"]["calls"] + state["usage"]["by_node"]["answer"]["calls"]
    assert loop_calls == 8
    assert len(of(updates, "tools")) == 7 and state["mra_tool_log"][-1]["round"] == 7
    assert state["answer"] == "Pixel" and state["mra_forced_final"] is True


def test_unusable_model_gets_seven_rounds_no_tools_and_a_fallback_answer(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate_default="I am thinking about it.", final="still no JSON")
    state, updates = run(q(base, qm))
    assert qm.kinds.count("navigate") == 7 and qm.kinds.count("final") == 1
    assert of(updates, "tools") == []
    assert state["answer"] == "No information available" and state["supports"] == []


# --- 11. bad calls and repeats


def test_bad_calls_count_and_repeats_do_not(base: AllMethodsContext) -> None:
    bad = {"mode": "navigate", "calls": [{"tool": "no_such_tool", "args": {}},
                                         {"tool": "query_event_context", "args": {"oops": 1}},
                                         {"tool": "query_event_context", "args": {"event_id": "D1:2"}}]}
    repeat = {"mode": "navigate", "calls": [{"tool": "query_event_context", "args": {"event_id": " d1:2 "}}]}
    qm = QuestionModel(navigate=[bad, repeat, ANSWER])
    state, updates = run(q(base, qm, mra_stop_on_repeat=False))  # the spec: the loop goes on after a repeat
    assert state["mra_calls_total"] == 3
    errors = [e["error"] for e in state["mra_tool_log"]]
    assert errors[0] and "unknown tool" in errors[0] and "bad arguments" in errors[1] and errors[2] is None
    route2 = of(updates, "route")[1]
    assert route2["mra_pending_calls"] == [] and "already called" in route2["mra_dropped_calls"][0]["reason"]
    assert len(of(updates, "tools")) == 1 and state["answer"] == "Riverside shelter"


@pytest.mark.parametrize("stop", [True, False])
def test_a_round_of_repeated_calls_goes_to_the_final_answer(base: AllMethodsContext, stop: bool) -> None:
    call = {"mode": "navigate", "calls": [{"tool": "query_event_context", "args": {"event_id": "D1:2"}}]}
    qm = QuestionModel(navigate_default=call)  # the same calls every round, as the 1.5B model does
    state, updates = run(q(base, qm, mra_stop_on_repeat=stop))
    assert state["mra_calls_total"] == 1 and len(of(updates, "tools")) == 1
    routes = [r["trace"][-1]["edge"] for r in of(updates, "route")]
    if stop:  # the second round's only call repeats the first's: nothing new could reach a third prompt
        assert qm.kinds.count("navigate") == 2 and routes == ["tools", "answer (forced: every call repeated an earlier one)"]
    else:  # the spec: navigate again until the round budget forces the answer
        assert qm.kinds.count("navigate") == base.mra_max_rounds - 1 and routes[-1] == "answer (forced: round budget)"
    assert qm.kinds.count("final") == 1 and state["mra_forced_final"] is True and state["answer"] == "Pixel"


# --- 12. supports


def test_supports_map_to_shown_turns() -> None:
    turns = {"D3:12", "D9:99"}
    assert map_supports(["D3:12-2", "D9:99"], ["D3:12"], turns) == ["D3:12"]  # D9:99 exists but was not shown
    assert map_supports(["D3:t2", "D3:12"], ["D3:12", "D3:t2"], turns) == ["D3:12"]  # a topic id is no turn


def test_answer_supports_only_shown_turns(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[{"mode": "navigate", "calls": [{"tool": "query_event_context",
                                                                  "args": {"event_id": "D1:2"}}]},
                                 {**ANSWER, "supports": ["D1:3-1", "D9:99", "D2:3"]}])
    state, _ = run(q(base, qm))
    assert "D1:3" in state["masks"] and "D2:3" not in state["mra_visible_ids"]
    assert state["supports"] == ["D1:3"]
    assert state["critical_memories"][0]["id"] == "D1:3" and "Riverside" in state["critical_memories"][0]["text"]


def test_keep_goes_into_critical_memories(base: AllMethodsContext) -> None:
    nav = {"mode": "navigate", "keep": ["D1:1-1", "D2:3"], "reason": "Pixel is the cat",
           "calls": [{"tool": "query_event_context", "args": {"event_id": "D1:2"}}]}
    qm = QuestionModel(navigate=[nav, {**ANSWER, "supports": []}])
    state, updates = run(q(base, qm))
    route1 = of(updates, "route")[0]
    assert [m["id"] for m in route1["critical_memories"]] == ["D1:1"]
    assert route1["critical_memories"][0]["why"] == "Pixel is the cat"
    rec = next(r for r in state["trace"] if r["node"] == "route")
    assert rec["kept"] == ["D1:1"] and rec["keep_ignored"] == ["D2:3"]
    final = {m["id"]: m for m in state["critical_memories"]}
    assert final["D1:1"]["why"] == "Pixel is the cat"  # kept memories survive into the final output
    assert state["supports"] == ["D1:3"]  # no citation: the shown turn containing the answer text


# --- 13. no category hints


def test_no_category_text_in_any_prompt(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate_default=lambda n, p: _ctx_calls(1, start=n))
    run(q(base, qm))
    for prompt in qm.model.prompts():
        low = prompt.lower()
        for word in ("category", "adversarial", "multi-hop", "single-hop", "open-domain", "temporal question"):
            assert word not in low


# --- 14. no answer call after a valid navigate answer


def test_answer_makes_no_call_after_a_navigate_answer(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[ANSWER])
    state, _ = run(q(base, qm))
    assert qm.kinds == ["cues", "navigate"]
    assert state["answer"] == "Riverside shelter" and state["mra_confidence"] == 0.9
    assert "answer" not in state["usage"]["by_node"]
    # D1:3 (the cited turn) was never shown: the seed for "Pixel" shows D1:1, D1:2 and D2:4 only
    assert "D1:3" not in state["mra_visible_ids"] and state["supports"] == []


# --- our addition: the short-answer rewrite (mra_answer_rewrite)

SENTENCE = {**ANSWER, "answer": "Ann found Pixel at the Riverside shelter near her flat.", "supports": ["D1:1-1"]}


def test_rewrite_turns_a_sentence_into_a_span(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[SENTENCE], rewrite={"answer": "Riverside shelter"})
    state, _ = run(q(base, qm, mra_answer_rewrite=True))
    assert qm.kinds == ["cues", "navigate", "rewrite"]
    assert state["answer"] == "Riverside shelter"
    rewrite_prompt = qm.model.prompts()[-1]
    assert "Draft answer: Ann found Pixel at the Riverside shelter" in rewrite_prompt and Q in rewrite_prompt
    assert "[D1:1] (" in rewrite_prompt  # the cited turn, with its date, for relative times
    rec = next(r for r in state["trace"] if r["node"] == "answer")
    assert rec["draft"] == SENTENCE["answer"] and rec["answer"] == "Riverside shelter"
    assert state["answer_before_rewrite"] == SENTENCE["answer"]  # typed state, beside the trace record
    assert state["usage"]["by_node"]["rewrite_answer"]["calls"] == 1


@pytest.mark.parametrize("reply", [{"answer": "No information available"}, {"answer": "Ann Pixel"}, {"answer": ""},
                                   {"oops": 1}])
def test_rewrite_never_loses_the_draft(base: AllMethodsContext, reply: dict[str, Any]) -> None:
    # "no information", an echo of the question's words, an empty or an invalid reply: the draft stays
    qm = QuestionModel(navigate=[SENTENCE], rewrite=reply)
    state, _ = run(q(base, qm, mra_answer_rewrite=True))
    assert state["answer"] == SENTENCE["answer"]
    assert "fallback_rule" in next(r for r in state["trace"] if r["node"] == "answer")


def test_no_rewrite_call_for_no_information(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[{**ANSWER, "answer": "No information available", "supports": []}])
    state, _ = run(q(base, qm, mra_answer_rewrite=True))
    assert "rewrite" not in qm.kinds and state["answer"] == "No information available"


def test_rewritten_span_finds_supports_the_sentence_did_not(base: AllMethodsContext) -> None:
    # No usable citation: the sentence occurs in no shown turn, the span "grey cat" does (D1:1, shown by the seed)
    qm = QuestionModel(navigate=[{**SENTENCE, "answer": "Ann has a cat that is grey.", "supports": []}],
                       rewrite={"answer": "grey cat"})
    state, _ = run(q(base, qm, mra_answer_rewrite=True))
    assert state["answer"] == "grey cat" and state["supports"] == ["D1:1"]


# --- output contract and bad input


def test_output_contract_and_trace(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[{"mode": "navigate", "calls": [{"tool": "query_event_context",
                                                                  "args": {"event_id": "D1:5"}}]}, ANSWER])
    state, _ = run(q(base, qm))
    nodes = [r["node"] for r in state["trace"]]
    assert nodes == ["extract_cues", "seed", "navigate", "route", "tools", "navigate", "route", "answer"]
    tools_rec = next(r for r in state["trace"] if r["node"] == "tools")
    assert tools_rec["results"][0]["call"].startswith("query_event_context")
    returned = tools_rec["results"][0]["returned"]
    second_nav = [r for r in state["trace"] if r["node"] == "navigate"][1]
    assert returned and set(returned) <= set(second_nav["shown_turn_ids"])  # shown when rendered, not when returned
    assert state["usage"]["calls"] == 3


def test_shown_turn_ids_in_state_are_the_ones_the_trace_records_name(data_dir: str) -> None:
    ctx = _many(data_dir, 30)
    pick = {"events": [f"D1:{i}-1" for i in range(1, 6)]}
    qm = QuestionModel(cues=CUES_GT, pick=pick, score={"scores": {"D1:7-1": 0.9}},
                       navigate=[{"mode": "navigate", "calls": [{"tool": "query_event_context",
                                                                  "args": {"event_id": "D1:2", "window": 2}}]}])
    state, updates = run(q(ctx, qm, mra_max_rounds=2, mra_preselect="llm_union", mra_tag_score="llm"), "What about the garden tomato?")
    records = {r["node"]: r for r in state["trace"] if "shown_turn_ids" in r}
    assert set(records) == {"seed_pick", "seed_score", "navigate", "answer"}  # answer: the forced final call
    assert of(updates, "seed")[0]["shown_turn_ids"] == records["seed_pick"]["shown_turn_ids"]
    assert of(updates, "navigate")[0]["shown_turn_ids"] == records["navigate"]["shown_turn_ids"]
    assert of(updates, "answer")[0]["shown_turn_ids"] == records["answer"]["shown_turn_ids"]
    assert state["shown_turn_ids"] == trace_shown_turn_ids(state["trace"])
    assert "answer_before_rewrite" not in of(updates, "answer")[0]  # no rewrite ran


def test_cue_extraction_fallback(base: AllMethodsContext) -> None:
    qm = QuestionModel(cues="no json", navigate=[ANSWER])
    state, _ = run(q(base, qm), "Where did Ann find Pixel?")
    assert [c["cue"] for c in state["mra_cues"]] == ["Ann", "find", "Pixel"]
    assert state["mra_time_window"] is None


def test_namespace_without_graph(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=QuestionModel().model)
    with pytest.raises(NamespaceError):
        graph.invoke({"namespace": "ns", "question": Q}, context=ctx)


def test_max_rounds_one_goes_straight_to_the_forced_answer(base: AllMethodsContext) -> None:
    qm = QuestionModel()
    state, _ = run(q(base, qm, mra_max_rounds=1))
    assert qm.kinds == ["cues", "final"] and state["answer"] == "Pixel"


def test_a_cited_line_counts_for_its_leading_id() -> None:
    from recollect.graphs.mragent.supports import map_supports

    visible = ["D1:1", "D1:3"]
    cited = ["D1:1: Maya: I adopted a dog called Biscuit. (2024-03-04)", "[D1:3-1] Maya walks Biscuit", "D1:12x"]
    assert map_supports(cited, visible, {"D1:1", "D1:3", "D1:12"}) == ["D1:1", "D1:3"]
