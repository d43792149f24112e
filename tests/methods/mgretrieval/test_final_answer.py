"""MGRetrieval's final answer call (`mg_final_answer_tokens`, issue 35): after the rounds, one call writes the
answer as rag does from the turns the rounds showed and their groups brought in, the kept memories first; the
rewrite runs only when it gives no answer; off under profile=paper (the spec's rewrite answers)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from recollect.graphs.mgretrieval.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel
from recollect.prompts import load_prompt
from tests.helpers import run_graph
from tests.methods.mgretrieval.fakes import FakeAux, ingest_scripted, schema_props
from tests.methods.mgretrieval.test_graph import KW, TEXTS, Q, aux_model, recs

TURN_LINE = re.compile(r"^\[(D\d+:\d+)\] ", re.M)
ASSESS = {"answer": "apple pie", "sufficient": True, "critical_ids": ["D1:2"]}  # D1:2 "bravo note about apple pie"


@pytest.fixture
def data(data_dir: str) -> str:
    """test_graph.py's memory: eight turns of Ann's with known keywords (apple: D1:1-D1:5)."""
    ingest_scripted(data_dir, [[("Ann", t) for t in TEXTS]], FakeAux(KW), mg_match_min_sim=0.99)
    return data_dir


class Main:
    """The main model: `assess` for every assess call, `final` (an AnswerReply, or any reply) for the final
    call, "Rewritten" for the rewrite; it keeps each kind's prompts."""

    def __init__(self, final: Any, assess: dict[str, Any] | None = None) -> None:
        self.final, self.assess = final, assess or ASSESS
        self.prompts: dict[str, list[str]] = {"assess": [], "final": [], "rewrite": []}
        self.final_messages: list[list[Any]] = []
        self.model = ScriptedChatModel(default=self.reply)

    def reply(self, messages: list[Any], kwargs: dict[str, Any]) -> Any:
        text = "\n".join(str(m.content) for m in messages)
        props = schema_props(kwargs)
        kind = "assess" if "sufficient" in props else "final" if "supports" in props else "rewrite"
        self.prompts[kind].append(text)
        if kind == "final":
            self.final_messages.append(list(messages))
        return {"assess": self.assess, "final": self.final, "rewrite": {"answer": "Rewritten"}}[kind]


def ask(data_dir: str, main: Main, keywords: list[str], **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The final call in rag's own prompt unless `kw` says otherwise (the continuation has its own tests below)."""
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=main.model, aux_chat_model=aux_model(keywords),
                            **{"mg_final_answer_tokens": 1280, "mg_final_answer_continues": False, **kw})
    return run_graph(graph, ctx, "ns", Q)


def test_the_final_call_answers_in_rags_prompt_and_the_rewrite_does_not_run(data: str) -> None:
    main = Main({"answer": "apple pie", "supports": ["[D1:2]", "D9:9"]})
    out, state = ask(data, main, ["apple"])
    assert len(main.prompts["final"]) == 1 and main.prompts["rewrite"] == []
    text = main.prompts["final"][0]
    assert text.startswith(load_prompt("baselines", "answer").split("{memories}")[0].strip())  # rag's words
    assert "[D1:2] " in text and "Ann: bravo note about apple pie" in text  # rag's turn line
    assert out["answer"] == "apple pie"
    assert out["supports"] == ["D1:2"]  # an id never shown is dropped
    assert [m["id"] for m in out["critical_memories"]] == ["D1:2"] and out["critical_memories"][0]["date"]
    assert state["answer_before_rewrite"] == "apple pie"  # the draft, scored by the eval too
    shown = TURN_LINE.findall(text)
    assert set(shown) <= set(state["shown_turn_ids"])  # the final call's turns count as shown
    record = recs(out["trace"], "final_answer")[0]
    assert record["final_draft"] == "apple pie" and record["final_turn_ids"] == shown and record["llm_role"] == "main"
    assert not recs(out["trace"], "rewrite")


def test_turns_the_rounds_brought_in_but_did_not_show_reach_the_final_call(data: str) -> None:
    """A group of 5 (apple) cut to 2 a round: its other turns were retrieved, never shown, and the final call
    reads them, the kept memory first."""
    main = Main({"answer": "pie", "supports": ["D1:2"]})
    out, state = ask(data, main, ["apple"], mg_max_new_per_round=2, mg_dense_fill=0, mg_max_rounds=1)
    round_shown = recs(out["trace"], "retrieve_round")[0]["new_ids"]
    assert len(round_shown) == 2
    final_turns = TURN_LINE.findall(main.prompts["final"][0])
    assert set(final_turns) == {"D1:1", "D1:2", "D1:3", "D1:4", "D1:5"} and set(final_turns) - set(round_shown)
    assert set(final_turns) <= set(state["shown_turn_ids"])


def test_the_kept_memories_come_first_within_the_budget(data: str) -> None:
    main = Main({"answer": "pie", "supports": ["D1:2"]})
    out, _ = ask(data, main, ["apple"], mg_final_answer_tokens=1)
    assert TURN_LINE.findall(main.prompts["final"][0]) == ["D1:2"]  # the budget keeps the first: the kept memory
    record = recs(out["trace"], "final_answer")[0]
    assert record["final_left_out_for_budget"] and "D1:2" not in record["final_left_out_for_budget"]


@pytest.mark.parametrize("reply", [{"answer": "No information available", "supports": []}, "not json at all"])
def test_no_usable_final_answer_leaves_the_answer_to_the_rewrite(data: str, reply: Any) -> None:
    main = Main(reply)
    out, state = ask(data, main, ["apple"])
    assert len(main.prompts["final"]) == (1 if isinstance(reply, dict) else 2)  # an invalid reply is retried once
    assert len(main.prompts["rewrite"]) == 1
    assert out["answer"] == "Rewritten" and out["supports"] == ["D1:2"]
    assert state["answer_before_rewrite"] == "apple pie"
    assert recs(out["trace"], "final_answer")[0]["fallback"] == "the final answer call gave no answer: the rewrite answers"


def test_off_under_paper_and_at_zero(data: str) -> None:
    assert AllMethodsContext(profile="paper").mg_final_answer_tokens == 0
    assert AllMethodsContext().mg_final_answer_tokens == 1280
    main = Main({"answer": "never asked", "supports": []})
    out, _ = ask(data, main, ["apple"], mg_final_answer_tokens=0)
    assert main.prompts["final"] == [] and len(main.prompts["rewrite"]) == 1
    assert out["answer"] == "Rewritten" and not recs(out["trace"], "final_answer")


def test_the_final_call_continues_the_last_assess_exchange_with_only_the_turns_it_did_not_show(data: str) -> None:
    """A group of 5 (apple) cut to 2 a round: round 1's assess prompt and reply are re-sent unchanged (a prompt
    cache serves them), then one message with rag's answer rules and the picked turns that prompt did not hold."""
    main = Main({"answer": "pie", "supports": ["D1:2", "D1:5", "D9:9"]})
    out, state = ask(data, main, ["apple"], mg_max_new_per_round=2, mg_dense_fill=0, mg_max_rounds=1,
                     mg_final_answer_continues=True)
    (assess_prompt,) = main.prompts["assess"]
    first, reply, task = (str(m.content) for m in main.final_messages[0])
    assert first == assess_prompt and json.loads(reply) == ASSESS
    assert task.startswith("No more rounds") and "Answer with a short phrase" in task and Q in task
    record = recs(out["trace"], "final_answer")[0]
    assert record["final_layout"] == "continues the last exchange"
    new = TURN_LINE.findall(task)
    assert new == record["final_new_turn_ids"] and new and set(new).isdisjoint(recs(out["trace"], "retrieve_round")[0]["new_ids"])
    assert set(record["final_turn_ids"]) == {"D1:1", "D1:2", "D1:3", "D1:4", "D1:5"}
    assert out["answer"] == "pie" and out["supports"] == ["D1:2", "D1:5"]  # an id never shown is dropped
    assert main.prompts["rewrite"] == []


def test_the_continuation_is_off_by_default_and_skips_an_exchange_that_needed_a_retry(data: str) -> None:
    assert AllMethodsContext().mg_final_answer_continues is False
    replies = iter(["not json", ASSESS])
    main = Main({"answer": "pie", "supports": ["D1:2"]})
    # the first assess reply is unreadable, its retry answers
    main.model.default = lambda messages, kwargs: (
        next(replies) if "sufficient" in schema_props(kwargs) else main.reply(messages, kwargs))
    out, _ = ask(data, main, ["apple"], mg_final_answer_continues=True)
    assert len(main.final_messages) == 1 and len(main.final_messages[0]) == 1  # rag's own prompt
    assert "final_layout" not in recs(out["trace"], "final_answer")[0]
