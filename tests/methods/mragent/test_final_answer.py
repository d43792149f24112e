"""MRAgent's final answer call (`mra_final_answer_tokens`, issue 35): one last call writes the answer as rag does,
from the turns the loop showed and its tools returned, the navigate answer's citations first. It replaces the
forced final call, which runs only when it gives no answer and the loop gave none; off under profile=paper."""

from __future__ import annotations

import re
from typing import Any

import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.prompts import load_prompt
from tests.methods.mragent.fakes import TURNS_ANSWER, QuestionModel, ingest
from tests.methods.mragent.test_memory import CONTEXT_D1_2, TIME_D1_3, nav, run

ON = {"mra_final_answer_tokens": 1280, "mra_answer_rewrite": False}
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
