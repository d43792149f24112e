"""MemR3's prefix layout (memr3_prefix_layout) and the skipped budget call (memr3_skip_forced_router)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from recollect.graphs.memr3.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import scripted
from tests.helpers import nodes, run_graph
from tests.methods.memr3.test_graph import ANSWER, Q, by_kind, route, router_calls, with_model

TURN_LINE = re.compile(r"^\[[^\]\s]+\] .+$", re.M)


@pytest.fixture
def ctx(ctx: AllMethodsContext) -> AllMethodsContext:
    """The layout and the dropped budget call on (both off by default until measured on the model)."""
    return ctx.with_overrides(memr3_prefix_layout=True, memr3_skip_forced_router=True)


def text(call: dict[str, Any]) -> str:
    return "\n".join(str(m.content) for m in call["messages"])


def common_prefix(a: str, b: str) -> str:
    return a[: len(os.path.commonprefix([a, b]))]


def run(ctx: AllMethodsContext, replies: list[Any], **kw: Any) -> tuple[dict[str, Any], Any]:
    kw.setdefault("memr3_answer_continues", False)  # the paper layout's own answer prompt, compared with the prefix one
    model = scripted(replies)
    out, _ = run_graph(graph, with_model(ctx, model, **kw), "ns", Q)
    return out, model


def test_the_answer_call_starts_with_the_routers_prefix_through_the_turns(ctx: AllMethodsContext) -> None:
    out, model = run(ctx, [route("answer", evidence=["[D1:1] Ann adopted Pixel"], detailed_answer="Pixel"), ANSWER])
    router_call, answer_call = model.calls
    assert router_call["messages"][0].content == answer_call["messages"][0].content  # one system message
    shared = common_prefix(text(router_call), text(answer_call))
    snippets = [r for r in out["trace"] if r["node"] == "retrieve"][-1]["turn_ids"]
    assert snippets and all(f"[{tid}]" in shared for tid in snippets)
    assert "control memory retrieval" not in shared  # each step's own instructions come after it


def test_a_router_call_after_reflect_reuses_the_turns_and_the_instructions(ctx: AllMethodsContext) -> None:
    _, model = run(ctx, [route("reflect", reasoning="combine"), route("answer"), ANSWER], memr3_max_reflect_streak=2)
    first, second = router_calls(model)
    shared = common_prefix(text(first), text(second))
    assert "Evidence so far:" in shared and shared.count("\n[") >= 1


def test_each_call_sees_the_same_turns_and_notes_in_either_layout(ctx: AllMethodsContext) -> None:
    replies = [route("retrieve", evidence=["[D1:1] Ann adopted Pixel"], retrieval_query="violin"),
               route("answer", evidence=["[D1:2] Bob plays violin"], detailed_answer="Pixel"), ANSWER]
    seen = {}
    for layout in (False, True):
        _, model = run(ctx, list(replies), memr3_prefix_layout=layout)
        seen[layout] = [(sorted(TURN_LINE.findall(text(c))), "Pixel" in text(c), "Latest reasoning" in text(c))
                        for c in model.calls]
    assert seen[False] == seen[True] and len(seen[True]) == 3


@pytest.mark.parametrize("snippets", ["always", "all"])
def test_the_budget_call_is_skipped_and_recorded(ctx: AllMethodsContext, snippets: str) -> None:
    model = scripted(default=by_kind(route("retrieve", evidence=["[D1:1] Ann adopted Pixel"], retrieval_query="more")))
    out, state = run_graph(graph, with_model(ctx, model, memr3_answer_snippets=snippets), "ns", Q)
    routers = [r for r in out["trace"] if r["node"] == "router"]
    assert len(router_calls(model)) == 4 and len(model.calls) == 5
    assert routers[-1]["skipped_call"] == "router" and "budget" in routers[-1]["skip_reason"]
    assert routers[-1]["decision"] == "answer" and nodes(out["trace"])[-2:] == ["router", "answer"]
    assert state["iteration"] == 5 and out["answer"] and state["evidence"] == ["[D1:1] Ann adopted Pixel"]


def test_the_budget_call_is_made_when_the_answer_call_sees_no_turns(ctx: AllMethodsContext) -> None:
    model = scripted(default=by_kind(route("retrieve", retrieval_query="more")))
    out, _ = run_graph(graph, with_model(ctx, model, memr3_answer_snippets="never"), "ns", Q)
    assert len(router_calls(model)) == 5
    assert not any(r.get("skipped_call") for r in out["trace"])


def test_the_paper_profile_keeps_the_papers_calls_and_prompts(ctx: AllMethodsContext) -> None:
    model = scripted(default=by_kind(route("retrieve", retrieval_query="more")))
    paper = AllMethodsContext(profile="paper", data_dir=ctx.data_dir, memr3_chunk_tokens=20, memr3_top_k=2,
                              memr3_rerank="none")
    assert paper.memr3_prefix_layout is False and paper.memr3_skip_forced_router is False
    run_graph(graph, with_model(paper, model), "ns", Q)
    assert len(router_calls(model)) == 5
    assert all(c["messages"][0].content.startswith("You control memory retrieval") for c in router_calls(model))


def test_each_task_ends_with_the_question_after_the_shared_prefix(ctx: AllMethodsContext) -> None:
    # The paper's prompts end with the question; the prefix layout states it first and again right before the
    # reply, after the part the calls share, so the repeat costs no reuse.
    _, model = run(ctx, [route("answer", evidence=["[D1:1] Ann adopted Pixel"], detailed_answer="Pixel"), ANSWER])
    router_call, answer_call = model.calls
    shared = common_prefix(text(router_call), text(answer_call))
    for call in (router_call, answer_call):
        body = text(call)
        tail = body[body.rindex(Q):]
        assert body.count(Q) == 2 and "Reply with one JSON object only" in tail
        assert not TURN_LINE.search(tail) and "Evidence so far" not in tail and "Notes (" not in tail
        assert body.rindex(Q) > len(shared)
