"""What MemR3's answer call reads: every retrieval's turns (memr3_answer_snippets = all) and the cited turns
instead of the router's wording (memr3_answer_notes = ids), in both prompt layouts."""

from __future__ import annotations

import pytest

from recollect.graphs.memr3.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import scripted
from tests.helpers import run_graph
from tests.methods.memr3.test_graph import Q, route, with_model

CAT = "Ann adopted a grey cat named Pixel from the shelter"


def loop_then_answer() -> list:
    """The first retrieval shows the cat; the router asks for the kayak, then answers; nothing is cited."""
    return [route("retrieve", retrieval_query="kayak"), route("answer"), {"answer": "Pixel", "supports": []}]


@pytest.mark.parametrize("layout", [False, True])
@pytest.mark.parametrize("mode", ["always", "all"])
def test_all_shows_every_retrievals_turns_latest_first(ctx: AllMethodsContext, mode: str, layout: bool) -> None:
    model = scripted(loop_then_answer())
    settings = {"memr3_answer_snippets": mode, "memr3_top_k": 1, "memr3_prefix_layout": layout}
    out, state = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    first, second = (r["turn_ids"] for r in out["trace"] if r["node"] == "retrieve")
    assert [[t for s in r for t in s["turn_ids"]] for r in state["memr3_retrievals"]] == [first, second]
    prompt = "\n".join(str(m.content) for m in model.calls[-1]["messages"])
    assert all(f"[{t}]" in prompt for t in second)
    if mode == "all":  # the first retrieval (rag's) is masked by the second, yet still shown, after it
        assert prompt.index(f"[{first[0]}]") > prompt.index(f"[{second[0]}]")
        assert out["trace"][-1]["turns_shown"][: len(second) + len(first)] == second + first
    else:
        assert f"[{first[0]}]" not in prompt


@pytest.mark.parametrize("layout", [False, True])
def test_ids_shows_the_cited_turns_not_the_routers_wording(ctx: AllMethodsContext, layout: bool) -> None:
    bullet = "[D1:1] Ann has a dog called Rex"  # the router's own (wrong) wording of a turn it cites
    model = scripted([route("retrieve", evidence=[bullet], retrieval_query="kayak"),
                      route("answer", evidence=[bullet], detailed_answer="Rex"), {"answer": "Pixel", "supports": ["D1:1"]}])
    settings = {"memr3_answer_notes": "ids", "memr3_prefix_layout": layout}
    out, _ = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    prompt = "\n".join(str(m.content) for m in model.calls[-1]["messages"])
    assert CAT in prompt  # the cited turn itself, from the store
    assert "Rex" not in prompt and "Notes" not in prompt and "Draft answer" not in prompt
    assert prompt.rstrip().endswith('["turn id", ...]}') and Q in prompt
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"] and out["trace"][-1]["notes_shown"] is False


def test_ids_still_shows_the_notes_to_an_answer_call_that_sees_no_turns(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer", evidence=["[D1:1] Ann adopted Pixel"]), {"answer": "Pixel", "supports": []}])
    settings = {"memr3_answer_notes": "ids", "memr3_answer_snippets": "never"}
    out, _ = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    assert "[D1:1] Ann adopted Pixel" in str(model.calls[-1]["messages"][-1].content)
    assert out["trace"][-1]["notes_shown"] is True
