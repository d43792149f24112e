"""HyMem's final answer call (`hymem_final_answer_tokens`, issue 35): one last call writes the answer as rag does,
from the turns HyMem's rounds showed, the draft's supports first; the draft stands when it gives no answer; off
under profile=paper (the spec's `answer` returns the draft)."""

from __future__ import annotations

import json
import re

import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.prompts import load_prompt
from tests.methods.hymem.test_graph import TOPICS, Q, build_store, calls_of, model, prompt, records, run

COPIED = {"finished": 0, "answer": "I adopted a grey cat named Pixel", "used": ["D1:1"]}  # a whole turn
TURN_LINE = re.compile(r"^\[(D\d+:\d+)\] ", re.M)


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    return build_store(data_dir, TOPICS)


# rag's own prompt (the default); the continuation of the light or deep exchange has its own tests below
OWN = {"hymem_final_answer_continues": False}


def final_run(ctx: AllMethodsContext, replies: dict, **overrides: object) -> tuple[dict, dict, list[dict]]:
    m = model(LightTurnsReply=COPIED, **replies)
    out, state = run(ctx, m, hymem_light_turn_tokens=1280,
                     **{"hymem_final_answer_tokens": 1280, **OWN, **overrides})
    return out, state, calls_of(m, "AnswerReply")


def test_the_final_call_answers_from_the_turns_shown_in_rags_prompt(ctx: AllMethodsContext) -> None:
    out, state, finals = final_run(ctx, {"AnswerReply": {"answer": "Pixel", "supports": ["[D1:1]", "D9:9"]}})
    assert state["answer"] == "Pixel" and state["supports"] == ["D1:1"]  # an id never shown is dropped
    assert len(finals) == 1
    text = prompt(finals[0])
    head = load_prompt("baselines", "answer").split("{memories}")[0].strip()
    assert text.startswith(head)  # rag's instructions, word for word
    shown = TURN_LINE.findall(text)
    assert shown[0] == "D1:1" and set(shown) <= set(state["shown_turn_ids"])  # conversation order, only shown turns
    assert "[D1:1] 10:00 am on 1 May, 2023 | Ann: I adopted a grey cat named Pixel" in text  # rag's turn line, with its date
    record = records(out, "answer")[0]
    assert record["final_draft"] == COPIED["answer"] and record["calls"] == 1
    assert record["final_turn_ids"] == shown and "hymem_final_answer_tokens" in record["why"]
    assert state["answer_before_rewrite"] == COPIED["answer"]  # the eval scores the draft too


def test_the_drafts_supports_come_first_within_the_budget(ctx: AllMethodsContext) -> None:
    draft = {"finished": 0, "answer": "Porto", "used": ["D3:1"]}
    m = model(LightTurnsReply=draft, AnswerReply={"answer": "Porto", "supports": ["D3:1"]})
    out, _ = run(ctx, m, hymem_light_turn_tokens=1280, hymem_final_answer_tokens=1, **OWN)
    text = prompt(calls_of(m, "AnswerReply")[0])
    assert TURN_LINE.findall(text) == ["D3:1"]  # the budget keeps the first turn: the draft's support
    record = records(out, "answer")[0]
    assert record["final_left_out_for_budget"] and "D3:1" not in record["final_left_out_for_budget"]


@pytest.mark.parametrize("reply", [{"answer": "No information available", "supports": []}, "not json at all"])
def test_no_usable_final_answer_keeps_the_draft_and_says_so(ctx: AllMethodsContext, reply: object) -> None:
    out, state, finals = final_run(ctx, {"AnswerReply": reply})
    assert state["answer"] == COPIED["answer"] and state["supports"] == ["D1:1"]
    assert len(finals) == (1 if isinstance(reply, dict) else 2)  # an invalid reply is retried once
    record = records(out, "answer")[0]
    assert record["fallback"] == "the final answer call gave no answer: the draft stands"


def test_no_draft_and_a_final_answer(ctx: AllMethodsContext) -> None:
    """Every round said the memory was not enough (deep's answers unusable): the final call still reads the
    turns shown, and its answer is the answer."""
    replies = {"LightTurnsReply": {"finished": 2, "answer": ""}, "DeepReply": {"answer": ""},
               "AnswerReply": {"answer": "Pixel", "supports": ["D1:1"]}}
    out, state = run(ctx, model(**replies), hymem_light_turn_tokens=1280, hymem_final_answer_tokens=1280, **OWN)
    assert state["answer"] == "Pixel" and state["supports"] == ["D1:1"]
    assert "no module had a draft" in records(out, "answer")[0]["why"]
    assert state.get("answer_before_rewrite") is None


def test_off_under_paper_and_at_zero(ctx: AllMethodsContext) -> None:
    assert AllMethodsContext(profile="paper").hymem_final_answer_tokens == 0
    assert AllMethodsContext().hymem_final_answer_tokens == 1280
    _, state, finals = final_run(ctx, {}, hymem_final_answer_tokens=0)
    assert state["answer"] == COPIED["answer"] and finals == []
    assert state.get("answer_before_rewrite") is None


def test_the_final_call_continues_the_light_exchange_with_only_the_turns_it_did_not_show(ctx: AllMethodsContext) -> None:
    """The light call read the turns: the final call re-sends its messages and reply unchanged (a prompt cache
    serves them), then one message with rag's answer rules; every turn it picks was in the light prompt."""
    m = model(LightTurnsReply=COPIED, AnswerReply={"answer": "Pixel", "supports": ["D1:1", "D9:9"]})
    out, state = run(ctx, m, hymem_light_turn_tokens=1280, hymem_final_answer_tokens=1280,
                     hymem_final_answer_continues=True)
    light_call, = calls_of(m, "LightTurnsReply")
    final_call, = calls_of(m, "AnswerReply")
    sent, reply, task = final_call["messages"][:-2], final_call["messages"][-2], final_call["messages"][-1]
    assert [str(x.content) for x in sent] == [str(x.content) for x in light_call["messages"]]
    assert json.loads(str(reply.content)) == COPIED
    assert str(task.content).startswith("Now write the final answer") and Q in str(task.content)
    record = records(out, "answer")[0]
    assert record["final_layout"] == "continues the last exchange"
    assert record["final_new_turn_ids"] == [] and "(none beyond those above)" in str(task.content)
    assert set(record["final_turn_ids"]) <= set(state["shown_turn_ids"])
    assert state["answer"] == "Pixel" and state["supports"] == ["D1:1"]  # an id never shown is dropped


def test_the_continuation_is_off_by_default_and_with_the_final_call(ctx: AllMethodsContext) -> None:
    assert AllMethodsContext().hymem_final_answer_continues is False
    m = model(LightTurnsReply=COPIED)
    _, state = run(ctx, m, hymem_light_turn_tokens=1280, hymem_final_answer_tokens=0,
                   hymem_final_answer_continues=True)
    assert calls_of(m, "AnswerReply") == [] and state.get("hymem_exchange") is None  # nothing kept for no call
