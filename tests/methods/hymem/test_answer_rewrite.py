"""HyMem's span rewrite of its answer (`hymem_answer_rewrite`, issue 35): one more call, shown the turns the
answer rests on, for an answer longer than `hymem_rewrite_skip_words` words or holding a digit; off under
profile=paper (the spec's `answer` calls no model)."""

from __future__ import annotations

import pytest

from recollect.graphs.registry import AllMethodsContext
from tests.methods.hymem.test_graph import TOPICS, build_store, calls_of, model, prompt, records, run

COPIED = {"finished": 0, "answer": "I adopted a grey cat named Pixel", "used": ["D1:1"]}  # a whole turn


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    return build_store(data_dir, TOPICS)


def test_a_long_answer_is_rewritten_into_a_span_from_its_turns(ctx: AllMethodsContext) -> None:
    m = model(LightTurnsReply=COPIED, RewriteReply={"answer": "Pixel"})
    out, state = run(ctx, m, hymem_light_turn_tokens=1280, hymem_answer_rewrite=True)
    assert state["answer"] == "Pixel" and state["supports"] == ["D1:1"]
    rewrite = calls_of(m, "RewriteReply")
    assert len(rewrite) == 1
    text = prompt(rewrite[0])
    assert COPIED["answer"] in text and "[D1:1]" in text  # the draft and the turn it rests on
    record = records(out, "answer")[0]
    assert record["draft"] == COPIED["answer"] and record["calls"] == 1 and record["answer"] == "Pixel"


def test_a_short_answer_skips_the_call_and_the_trace_says_why(ctx: AllMethodsContext) -> None:
    m = model(LightTurnsReply={"finished": 0, "answer": "Pixel", "used": ["D1:1"]})
    out, state = run(ctx, m, hymem_light_turn_tokens=1280, hymem_answer_rewrite=True)
    assert state["answer"] == "Pixel" and calls_of(m, "RewriteReply") == []
    record = records(out, "answer")[0]
    assert record["skipped_call"] == "rewrite_answer" and "hymem_rewrite_skip_words" in record["skip_reason"]
    assert record["calls"] == 0


def test_a_failed_rewrite_keeps_the_answer(ctx: AllMethodsContext) -> None:
    m = model(LightTurnsReply=COPIED, RewriteReply={"answer": ""})
    out, state = run(ctx, m, hymem_light_turn_tokens=1280, hymem_answer_rewrite=True)
    assert state["answer"] == COPIED["answer"]
    assert "draft answer unchanged" in records(out, "answer")[0]["fallback_rule"]


def test_off_under_paper(ctx: AllMethodsContext) -> None:
    paper = AllMethodsContext(profile="paper")
    assert (paper.hymem_answer_rewrite, paper.hymem_rewrite_skip_words) == (False, 0)
    assert (AllMethodsContext().hymem_answer_rewrite, AllMethodsContext().hymem_rewrite_skip_words) == (False, 3)
    m = model(LightTurnsReply=COPIED)
    _, state = run(ctx, m, hymem_light_turn_tokens=1280, hymem_answer_rewrite=False)
    assert state["answer"] == COPIED["answer"] and calls_of(m, "RewriteReply") == []
