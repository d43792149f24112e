"""MemR3's router schema with one branch per decision (memr3_decision_fields, issue 34): a grammar-held reply
writes only the text field its decision reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recollect.graphs.memr3.graph import graph
from recollect.graphs.memr3.router import DECISION_FIELD, DECISIONS, RouterReply, router_schema
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import scripted
from recollect.settings import paper_values
from tests.helpers import run_graph
from tests.methods.memr3.test_graph import ANSWER, Q, route, router_calls, with_model

TEXT_FIELDS = set(DECISION_FIELD.values())


def branches(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["properties"]["decision"]["const"]: b for b in schema["anyOf"]}


def test_the_default_is_on_and_the_paper_profile_keeps_one_object() -> None:
    assert MemR3Context.__dataclass_fields__["memr3_decision_fields"].default is True
    assert paper_values(MemR3Context)["memr3_decision_fields"] is False


@pytest.mark.parametrize("tracker", [False, True])
def test_each_branch_holds_the_lists_and_only_its_decisions_text_field(tracker: bool) -> None:
    plain = router_schema(DECISIONS, require_tracker=tracker, bounded=True).model_json_schema()
    split = router_schema(DECISIONS, require_tracker=tracker, bounded=True, per_decision=True).model_json_schema()
    assert set(branches(split)) == set(DECISIONS)
    for decision, branch in branches(split).items():
        assert list(branch["properties"]) == ["evidence", "gaps", "decision", DECISION_FIELD[decision]]
        assert branch["required"] == plain["required"] and branch["additionalProperties"] is False
        for name in ("evidence", "gaps", DECISION_FIELD[decision]):  # the same caps as the one-object schema
            assert branch["properties"][name] == plain["properties"][name]


def test_a_forced_decision_has_one_branch() -> None:
    schema = router_schema(("answer",), bounded=True, per_decision=True).model_json_schema()
    assert list(branches(schema)) == ["answer"]


def test_llama_cpp_grammar_lets_no_decision_write_another_decisions_field() -> None:
    xllamacpp = pytest.importorskip("xllamacpp")
    schema = router_schema(DECISIONS, bounded=True, per_decision=True).model_json_schema()
    grammar = xllamacpp.json_schema_to_grammar(json.dumps(schema))
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)
    for i, decision in enumerate(("retrieve", "reflect", "answer")):
        assert rules[f"alternative-{i}-decision"] == f'"\\"{decision}\\""'
        named = {f for f in TEXT_FIELDS if any(f'"\\"{f}\\""' in body for rule, body in rules.items()
                                                 if rule.startswith(f"alternative-{i}-"))}
        assert named == {DECISION_FIELD[decision]}


def test_a_reply_with_every_field_still_validates() -> None:
    # the schema only shapes what a grammar lets the model write; validation stays lenient
    model = router_schema(DECISIONS, per_decision=True)
    reply = model.model_validate({"decision": "answer", "retrieval_query": "x", "reasoning": "y",
                                  "detailed_answer": "Pixel"})
    assert isinstance(reply, RouterReply) and reply.detailed_answer == "Pixel"


def test_the_router_sends_the_branches_to_a_grammar_endpoint(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", retrieval_query="cat name"), route("answer", detailed_answer="Pixel"),
                      ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_decision_fields=True), "ns", Q)
    calls = router_calls(model)
    assert len(calls) == 2 and all(c["kwargs"]["response_format"]["type"] == "json_object" for c in calls)
    assert set(branches(calls[0]["kwargs"]["response_format"]["schema"])) == set(DECISIONS)
    assert out["answer"] == "Pixel"


def test_a_hosted_json_schema_endpoint_gets_the_one_object_schema(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer"), ANSWER])
    run_graph(graph, with_model(ctx, model, memr3_decision_fields=True, structured_method="json_schema"), "ns", Q)
    sent = router_calls(model)[0]["kwargs"]["response_format"]["json_schema"]["schema"]
    assert "anyOf" not in sent and sent["properties"]["decision"]["enum"] == list(DECISIONS)
