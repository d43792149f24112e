"""MRAgent's cost defaults (issue 34): two rounds, the JSON protocol, and the final call that continues the last
navigate exchange (mra_answer_continues); each off under the paper's values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recollect.graphs.mragent import final
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.registry import AllMethodsContext
from recollect.settings import paper_values
from tests.methods.mragent.fakes import CONTINUED, QuestionModel, ingest
from tests.methods.mragent.test_memory import CONTEXT_D1_2, TIME_D1_3, nav, run

COST = ("mra_max_rounds", "mra_tool_protocol", "mra_answer_continues")
DEFAULTS = {name: MRAgentContext.__dataclass_fields__[name].default for name in COST}
FINAL = {"answer": "Riverside shelter", "supports": ["D1:3"], "confidence": 0.8}


@pytest.fixture
def base(data_dir: str) -> AllMethodsContext:
    ctx, _ = ingest(data_dir, **DEFAULTS)  # the shipped defaults, not the paper loop the other tests use
    return ctx


def calls_of(qm: QuestionModel, kind_prompt: str) -> list[dict[str, Any]]:
    """The calls whose only message starts with `kind_prompt` (a continued final call resends the navigate one)."""
    return [c for c in qm.model.calls if len(c["messages"]) == 1 and str(c["messages"][0].content).startswith(kind_prompt)]


def one_round(ctx: AllMethodsContext, **kw: Any) -> tuple[QuestionModel, dict[str, Any]]:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2, TIME_D1_3])], final=FINAL)
    state, _ = run(ctx.with_overrides(chat_model=qm.model, mra_answer_rewrite=False, **kw))
    return qm, state


def test_the_defaults_differ_from_the_paper_and_are_stated() -> None:
    assert DEFAULTS == {"mra_max_rounds": 2, "mra_tool_protocol": "json", "mra_answer_continues": True}
    paper = paper_values(MRAgentContext)
    assert {name: paper[name] for name in COST} == {"mra_max_rounds": 8, "mra_tool_protocol": "auto",
                                                    "mra_answer_continues": False}


def test_after_one_round_of_calls_the_final_call_continues_the_navigate_exchange(base: AllMethodsContext) -> None:
    qm, state = one_round(base)
    assert qm.kinds == ["cues", "navigate", "final"]  # two rounds: the calls of round 1 ran, then the answer
    nav_call, = calls_of(qm, "You answer a question")
    assert "tools" not in nav_call["kwargs"] and "response_format" in nav_call["kwargs"]  # JSON protocol
    final_call = qm.model.calls[-1]
    sent = final_call["messages"]
    assert [m.type for m in sent] == ["human", "ai", "human"]
    assert sent[0].content == nav_call["messages"][0].content  # the navigate prompt, unchanged: a cached prefix
    assert json.loads(str(sent[1].content)) == nav([CONTEXT_D1_2, TIME_D1_3])  # the navigate reply, as written
    new = str(sent[2].content)
    assert new.startswith(CONTINUED) and "Question: Where did Ann find Pixel?" in new
    assert "session date-time 10:00 am on 1 May, 2023" in new  # round 1's results: not in the navigate prompt
    for line in new.split("\n"):
        if line[:2] == "D1" and ": " in line:
            assert line not in str(sent[0].content)  # a memory the navigate prompt held is not sent again
    assert state["answer"] == "Riverside shelter" and state["supports"] == ["D1:3"]
    rec = next(r for r in state["trace"] if r["node"] == "answer")
    assert rec["answer_prompt"] == "continues the last navigate exchange"


def test_the_continued_call_is_shown_every_memory_line_of_the_own_prompt(base: AllMethodsContext) -> None:
    cont, _ = one_round(base)
    own, _ = one_round(base, mra_answer_continues=False)
    own_prompt = str(own.model.calls[-1]["messages"][0].content)
    assert own_prompt.startswith("Answer the question from the memories")
    memories = own_prompt.split("Memories (id: text), kept ones first, then the newest findings:\n", 1)[1]
    lines = [line for line in memories.split("\n\n", 1)[0].split("\n") if line.strip()]
    continued = "\n".join(str(m.content) for m in cont.model.calls[-1]["messages"])
    assert lines and all(line in continued for line in lines)


@pytest.mark.parametrize("kw", [{"mra_answer_continues": False}, {"mra_tool_protocol": "auto"},
                                {"mra_tool_protocol": "native"}])
def test_off_or_with_tools_bound_the_final_call_has_its_own_prompt(base: AllMethodsContext, kw: dict[str, Any]) -> None:
    qm, state = one_round(base, **kw)
    sent = qm.model.calls[-1]["messages"]
    assert len(sent) == 1 and str(sent[0].content).startswith("Answer the question from the memories")
    assert next(r for r in state["trace"] if r["node"] == "answer")["answer_prompt"] == "own prompt"


def test_a_continuation_too_long_for_the_window_falls_back_to_the_own_prompt(
        base: AllMethodsContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(final, "CONTINUE_MAX_TOKENS", 50)
    qm, state = one_round(base)
    sent = qm.model.calls[-1]["messages"]
    assert len(sent) == 1 and str(sent[0].content).startswith("Answer the question from the memories")
    assert next(r for r in state["trace"] if r["node"] == "answer")["answer_prompt"].startswith(
        "own prompt (the continued one would take about")


def test_an_unreadable_continued_reply_gets_the_recorded_fallback(base: AllMethodsContext) -> None:
    qm = QuestionModel(navigate=[nav([CONTEXT_D1_2])], final="not json at all")
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_answer_rewrite=False))
    rec = next(r for r in state["trace"] if r["node"] == "answer")
    assert state["answer"] == "No information available" and rec["fallback"] is True


def test_the_paper_profile_keeps_the_eight_round_loop_and_the_own_prompt(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, profile="paper")
    assert (ctx.mra_max_rounds, ctx.mra_tool_protocol, ctx.mra_answer_continues) == (8, "auto", False)
