"""MRAgent's final answer call (`mra_final_answer_tokens`, issue 35): one last call writes the answer as rag does,
from the turns the loop showed and its tools returned, the navigate answer's citations first. It replaces the
forced final call, which runs only when it gives no answer and the loop gave none; off under profile=paper."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from recollect import turn_continue
from recollect.graphs.registry import AllMethodsContext
from recollect.prompts import load_prompt
from recollect.steps import workspace
from tests.methods.mragent.fakes import TURNS_ANSWER, TURNS_CONTINUED, QuestionModel, ingest
from tests.methods.mragent.test_memory import CONTEXT_D1_2, TIME_D1_3, nav, run

# rag's own prompt (the default); the continuation of the navigate exchange has its own tests below
ON = {"mra_final_answer_tokens": 1280, "mra_answer_rewrite": False, "mra_final_answer_continues": False}
CONTINUES = {**ON, "mra_final_answer_continues": True, "mra_tool_protocol": "json"}
ANSWER = {"mode": "answer", "answer": "Ann found Pixel at the Riverside shelter near her flat.",
          "supports": ["D1:3"], "confidence": 0.9}
TURN_LINE = re.compile(r"^\[(D\d+:\d+)\] ", re.M)


@pytest.fixture
def base(data_dir: str) -> AllMethodsContext:
    ctx, _ = ingest(data_dir)
    return ctx


def turn_calls(qm: QuestionModel) -> list[dict[str, Any]]:
    return [c for c in qm.model.calls if str(c["messages"][0].content).startswith(TURNS_ANSWER)]


def answer_record(state: dict[str, Any]) -> dict[str, Any]:
    return [r for r in state["trace"] if r["node"] == "answer"][-1]


def test_the_navigate_answer_is_rewritten_by_rags_answer_step_from_the_turns_shown(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), ANSWER],
                       turns={"answer": "Riverside shelter", "supports": ["[D1:3]", "D9:9"]})
    state, _ = run(base.with_overrides(chat_model=qm.model, **ON))
    assert state["answer"] == "Riverside shelter" and state["supports"] == ["D1:3"]  # an unshown id is dropped
    assert qm.kinds[-1] == "turns" and "final" not in qm.kinds  # no forced call: the loop answered
    call, = turn_calls(qm)
    text = str(call["messages"][0].content)
    assert text.startswith(load_prompt("baselines", "answer").split("{memories}")[0].strip())
    shown = TURN_LINE.findall(text)
    assert "D1:3" in shown and set(shown) <= set(state["masks"])  # every turn it read counts as shown
    assert "Question: Where did Ann find Pixel?" in text
    record = answer_record(state)
    assert record["final_draft"] == ANSWER["answer"] and record["final_turn_ids"] == shown
    assert state["answer_before_rewrite"] == ANSWER["answer"]  # the eval scores the loop's answer too


def test_the_navigate_citations_come_first_within_the_budget(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), ANSWER],
                       turns={"answer": "Riverside shelter", "supports": ["D1:3"]})
    state, _ = run(base.with_overrides(chat_model=qm.model, **{**ON, "mra_final_answer_tokens": 1}))
    assert TURN_LINE.findall(str(turn_calls(qm)[0]["messages"][0].content)) == ["D1:3"]
    assert answer_record(state)["final_left_out_for_budget"]


def test_when_the_budget_ends_the_loop_the_turns_answer_replaces_the_forced_call(base: AllMethodsContext) -> None:
    """Round budget spent on tool calls: the final call reads the turns the last round's tools returned too."""
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2, TIME_D1_3])], turns={"answer": "Riverside shelter",
                                                                         "supports": ["D1:3"]})
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_max_rounds=2, mra_tool_protocol="json", **ON))
    assert qm.kinds == ["cues", "navigate", "turns"]
    assert state["answer"] == "Riverside shelter" and state["mra_forced_final"] is True
    assert {"D1:2", "D1:3"} <= set(TURN_LINE.findall(str(turn_calls(qm)[0]["messages"][0].content)))


@pytest.mark.parametrize("reply", [{"answer": "No information available", "supports": []}, "not json at all"])
def test_no_usable_turns_answer_keeps_the_navigate_answer(base: AllMethodsContext, reply: Any) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), ANSWER], turns=reply)
    state, _ = run(base.with_overrides(chat_model=qm.model, **ON))
    assert state["answer"] == ANSWER["answer"] and state["supports"] == ["D1:3"]
    assert answer_record(state)["fallback"] == "the final answer call gave no answer: the navigate answer stands"


def test_no_turns_answer_and_no_navigate_answer_falls_back_to_the_forced_call(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2, TIME_D1_3])],
                       turns={"answer": "No information available", "supports": []},
                       final={"answer": "Riverside shelter", "supports": ["D1:3"], "confidence": 0.7})
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_max_rounds=2, mra_tool_protocol="json", **ON))
    assert qm.kinds == ["cues", "navigate", "turns", "final"]
    assert state["answer"] == "Riverside shelter"
    assert "the forced final call answers" in answer_record(state)["fallback"]


def test_off_under_paper_and_at_zero(base: AllMethodsContext) -> None:
    paper = AllMethodsContext(profile="paper")
    assert (paper.mra_final_answer_tokens, paper.mra_answer_rewrite) == (0, False)
    assert (AllMethodsContext().mra_final_answer_tokens, AllMethodsContext().mra_answer_rewrite) == (1280, False)
    qm = QuestionModel(navigate=[ANSWER])
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_final_answer_tokens=0, mra_answer_rewrite=False))
    assert state["answer"] == ANSWER["answer"] and turn_calls(qm) == []
    assert state.get("answer_before_rewrite") is None


def continued_calls(qm: QuestionModel) -> list[dict[str, Any]]:
    return [c for c in qm.model.calls if str(c["messages"][-1].content).startswith(TURNS_CONTINUED)]


def test_the_final_call_continues_the_navigate_exchange_with_only_the_turns_it_did_not_show(
        base: AllMethodsContext) -> None:
    """Round 1 called a tool, round 2 answered: the final call re-sends round 2's prompt and reply unchanged (a
    prompt cache serves them), then rag's answer rules with the picked turns round 2's prompt did not hold."""
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), ANSWER],
                       turns={"answer": "Riverside shelter", "supports": ["D1:3", "D9:9"]})
    state, _ = run(base.with_overrides(chat_model=qm.model, **CONTINUES))
    call, = continued_calls(qm)
    navigates = [c for c in qm.model.calls if str(c["messages"][0].content).startswith("You answer a question")]
    last_prompt = str(navigates[-1]["messages"][0].content)
    first, reply, task = (str(m.content) for m in call["messages"])
    assert first == last_prompt and json.loads(reply)["answer"] == ANSWER["answer"]
    assert "answer with a short phrase" in task.lower() and "Question: Where did Ann find Pixel?" in task
    record = answer_record(state)
    assert record["final_layout"] == "continues the last exchange"
    new = TURN_LINE.findall(task)
    assert new == record["final_new_turn_ids"] and set(new) <= set(record["final_turn_ids"])
    turns = workspace(base).turns("ns")
    for tid in record["final_turn_ids"]:  # a turn is re-sent only when the navigate prompt did not hold its text
        assert (f"{turns[tid].speaker}: {turns[tid].full_text}" in last_prompt) is (tid not in new)
    assert set(record["final_turn_ids"]) - set(new)  # some were read above
    assert state["answer"] == "Riverside shelter" and state["supports"] == ["D1:3"]  # an id never shown is dropped
    assert set(record["final_turn_ids"]) <= set(state["masks"])
    assert turn_calls(qm) == []  # rag's own prompt was not sent


def test_a_continuation_past_the_window_uses_rags_own_prompt(base: AllMethodsContext,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turn_continue, "CONTINUE_MAX_TOKENS", 10)
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), ANSWER], turns={"answer": "Riverside shelter",
                                                                     "supports": ["D1:3"]})
    state, _ = run(base.with_overrides(chat_model=qm.model, **CONTINUES))
    assert continued_calls(qm) == [] and len(turn_calls(qm)) == 1
    assert state["answer"] == "Riverside shelter"


def test_the_continuation_is_off_by_default_and_needs_the_json_protocol(base: AllMethodsContext) -> None:
    assert AllMethodsContext().mra_final_answer_continues is False
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2]), ANSWER], turns={"answer": "Riverside shelter",
                                                                     "supports": ["D1:3"]})
    run(base.with_overrides(chat_model=qm.model, **{**CONTINUES, "mra_tool_protocol": "auto"}))
    assert continued_calls(qm) == [] and len(turn_calls(qm)) == 1  # bound tools: no exchange to continue
