"""MGRetrieval's typed state (graphs/mgretrieval/state.py) and the round mechanics that feed it: the
shared `shown_turn_ids` / `answer_before_rewrite` keys, the per-question `mg_round_log` the eval reads,
critical ids of any shape, and the prompt-budget cut of a round's new memories.

Same fixture and scripted models as test_graph.py (the spec's retrieval rounds, `SPEC`).
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from recollect.answer_rewrite import memory_line
from recollect.graphs.mgretrieval.answering import AssessReply
from recollect.graphs.mgretrieval.graph import AUX_LLM_NODES, graph
from recollect.graphs.mgretrieval.metrics import round_kinds
from recollect.graphs.mgretrieval.turns import memory_item, session_dates
from recollect.graphs.registry import AllMethodsContext, method_eval_fields
from recollect.llm.usage import estimate_tokens
from recollect.memory.turn_ranking import similarities
from recollect.memory.workspace import open_workspace
from recollect.prompts import load_prompt
from recollect.runner import ask as run_ask
from recollect.steps import NO_INFO
from recollect.trace import shown_turn_ids
from tests.methods.mgretrieval.fakes import FakeAux, ingest_scripted
from tests.methods.mgretrieval.test_graph import KW, SPEC, TEXTS, Q, ask, aux_model, main_model, recs


@pytest.fixture
def data(data_dir: str) -> str:
    ingest_scripted(data_dir, [[("Ann", t) for t in TEXTS]], FakeAux(KW), mg_match_min_sim=0.99)
    return data_dir


def test_state_keys_carry_what_the_trace_records(data: str) -> None:
    main = main_model(False, keep="first")
    out, state, _ = ask(data, ["apple", "banana"], main, mg_max_rounds=2)
    # every turn shown to the model, in first-shown order: the same union the trace records give
    assert out["shown_turn_ids"] == shown_turn_ids(out["trace"]) == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]
    assert out["answer_before_rewrite"] == recs(out["trace"], "rewrite")[0]["draft"] == "draft 2"
    assert out["answer"] == "Final"
    assert [(e["node"], e["round"]) for e in out["mg_round_log"]] == [
        ("retrieve_round", 1), ("assess", 1), ("retrieve_round", 2), ("assess", 2)]
    assert round_kinds(out) == round_kinds(state) == {
        "mg_rounds": 2, "mg_speaker_only_rounds": 0, "mg_cap_truncated_rounds": 0, "mg_filled_turns": 0,
        "mg_ungrounded_sufficient_rounds": 0}


def test_the_eval_reads_the_round_kinds_from_a_runs_final_values(data: str) -> None:
    """`recollect.runner.ask` returns the run's final state values: `mg_round_log` is one of them, so the
    registry's `eval_fields` hook sees the rounds without any trace record."""
    ctx = AllMethodsContext(data_dir=data, chat_model=main_model(False), aux_chat_model=aux_model(["apple"]),
                            **{**SPEC, "mg_max_rounds": 2})
    final = run_ask("ns", Q, "mgretrieval", ctx)
    assert method_eval_fields("mgretrieval", final) == round_kinds(final)
    assert round_kinds(final)["mg_rounds"] == 1 and final["shown_turn_ids"] == shown_turn_ids(final["trace"])
    assert "select_keywords" in AUX_LLM_NODES


def test_no_rewrite_call_leaves_no_draft(data: str) -> None:
    main = main_model(False)
    out, _, _ = ask(data, [], main, mg_empty_fallback="none")
    assert out["answer"] == NO_INFO and main.calls == []
    assert out.get("answer_before_rewrite") is None and not out.get("shown_turn_ids")
    assert round_kinds(out)["mg_rounds"] == 0


def test_round_log_starts_again_with_each_question_on_a_thread(data: str) -> None:
    ctx = AllMethodsContext(data_dir=data, chat_model=main_model(False), aux_chat_model=aux_model(["apple"]),
                            **{**SPEC, "mg_max_rounds": 2})
    g = graph.builder.compile(checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    g.invoke({"namespace": "ns", "question": Q}, config, context=ctx)
    first = g.get_state(config).values
    g.invoke({"namespace": "ns", "question": "And the apple pie?"}, config, context=ctx)
    second = g.get_state(config).values
    assert round_kinds(first)["mg_rounds"] == 1  # Φ(apple) fits one round
    assert round_kinds(second)["mg_rounds"] == 1 and len(second["mg_round_log"]) == 2


def test_critical_ids_of_any_shape_are_read_from_the_reply() -> None:
    reply = AssessReply.model_validate({"critical_ids": "[bob-q1], bob-q2"})
    assert reply.critical_ids == ["bob-q1", "bob-q2"]
    assert AssessReply.model_validate({"critical_ids": "D1:2 and D1:3"}).critical_ids == ["D1:2", "D1:3"]
    assert AssessReply.model_validate({"critical_ids": ["[D1:2]", "D1:3"]}).critical_ids == ["D1:2", "D1:3"]


def test_critical_ids_cited_in_a_string_name_the_shown_turns(data: str) -> None:
    main = main_model(True, keep=lambda text: "see [D1:2], D1:1 and D9:9")
    out, state, _ = ask(data, ["apple", "banana"], main)  # round 1 shows D1:1..D1:3
    assert state["supports"] == ["D1:2", "D1:1"]
    assert recs(out["trace"], "assess")[0]["dropped_ids"] == ["D9:9"]  # never shown: invented


def test_new_memories_are_cut_to_the_prompt_budget_least_similar_first(data: str) -> None:
    ws = open_workspace(data)
    turns, dates = ws.turns("ns"), session_dates(ws, "ns")
    apple = ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]  # Φ(apple): the one group of Q = [apple]
    cost = {t: estimate_tokens(memory_line(memory_item(turns[t], dates[t]))) for t in apple}
    sims = similarities(ws, "ns", Q, apple)
    by_similarity = sorted(apple, key=lambda t: -sims[t])
    fixed = estimate_tokens(load_prompt("mgretrieval", "assess") + Q + "(none)") + 150  # round 1: no a, no H
    room = cost[by_similarity[0]] + cost[by_similarity[1]]  # the two most similar fit, the third does not

    out, _, _ = ask(data, ["apple"], main_model(True), max_prompt_tokens=fixed + room)
    r1 = recs(out["trace"], "retrieve_round")[0]
    assert set(r1["new_ids"]) == set(by_similarity[:2]) and r1["n_budget_cut"] == 3
    assert r1["new_ids"] == [t for t in apple if t in r1["new_ids"]]  # still shown in conversation order

    out, _, _ = ask(data, ["apple"], main_model(True), max_prompt_tokens=1)
    r1 = recs(out["trace"], "retrieve_round")[0]
    assert r1["new_ids"] == by_similarity[:1] and r1["n_budget_cut"] == 4  # never an empty round
