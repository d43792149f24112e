"""MemR3's calls laid out for a prompt cache and bounded in what they decode (issue 34): the answer call as the
continuation of the router's exchange (memr3_answer_continues), the router's system message kept the same
(memr3_stable_router_system), and the reply grammars' caps (memr3_reply_bounds)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from recollect.graphs.memr3.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import scripted
from tests.helpers import run_graph
from tests.methods.memr3.test_graph import Q, decision_enum, route, router_calls, with_model

CAT = "Ann adopted a grey cat named Pixel from the shelter"


def test_the_answer_call_resends_the_routers_exchange_and_adds_one_message(ctx: AllMethodsContext) -> None:
    router_reply = route("answer", evidence=["[D1:1] Ann's cat is Pixel"], detailed_answer="Pixel, a grey cat")
    model = scripted([router_reply, {"answer": "Pixel", "supports": ["D1:1"]}])
    out, state = run_graph(graph, with_model(ctx, model, memr3_answer_continues=True), "ns", Q)
    routed, answered = model.calls[0]["messages"], model.calls[-1]["messages"]
    assert len(model.calls) == 2
    assert [type(m) for m in answered] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert [m.content for m in answered[:2]] == [m.content for m in routed]  # byte for byte: a cacheable prefix
    assert json.loads(str(answered[2].content)) == router_reply  # the reply as the model wrote it
    task = str(answered[3].content)
    assert task.rstrip().endswith('["turn id", ...]}') and f"Question: {Q}" in task
    assert "From earlier steps" not in task  # nothing the router was not shown
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]
    assert out["trace"][-1]["answer_prompt"] == "continues the router's exchange"
    assert state["memr3_exchange"]["reply"] == str(answered[2].content)


def test_what_the_router_was_not_shown_comes_in_the_new_message(ctx: AllMethodsContext) -> None:
    """memr3_answer_snippets = all: the first retrieval's turns, masked by the second and so not in the answering
    router call's prompt, are added; so is a cited bullet the router dropped and the tracker carried over."""
    bullet = "[D1:1] Ann's cat is Pixel"
    model = scripted([route("retrieve", evidence=[bullet], retrieval_query="kayak"), route("answer"),
                      {"answer": "Pixel", "supports": ["D1:1"]}])
    settings = {"memr3_answer_continues": True, "memr3_answer_snippets": "all", "memr3_top_k": 1}
    out, _ = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    first, second = (r["turn_ids"] for r in out["trace"] if r["node"] == "retrieve")
    routed, task = str(model.calls[1]["messages"][-1].content), str(model.calls[-1]["messages"][-1].content)
    assert f"[{first[0]}]" not in routed and f"[{second[0]}]" in routed
    assert "From earlier steps" in task and f"[{first[0]}]" in task and bullet in task
    assert out["trace"][-1]["turns_shown"] == second + first


def test_off_or_unusable_exchange_means_the_answer_calls_own_prompt(ctx: AllMethodsContext) -> None:
    answer = {"answer": "Pixel", "supports": []}
    cases = {
        "off": ({"memr3_answer_continues": False}, [route("answer"), answer]),
        "paper": ({"profile": "paper"}, [route("answer"), answer]),
        "turns not shown": ({"memr3_answer_continues": True, "memr3_answer_snippets": "never"},
                            [route("answer"), answer]),
        "notes not shown": ({"memr3_answer_continues": True, "memr3_answer_notes": "ids"}, [route("answer"), answer]),
        "retried router reply": ({"memr3_answer_continues": True}, ["not json", route("answer"), answer]),
    }
    for name, (settings, replies) in cases.items():
        model = scripted(replies)
        out, state = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
        assert not any(isinstance(m, AIMessage) for m in model.calls[-1]["messages"]), name
        assert state.get("memr3_exchange") is None, name
        assert out["answer"] == "Pixel" and len(router_calls(model)) >= 1, name


def test_a_skipped_budget_call_leaves_no_exchange_to_continue(ctx: AllMethodsContext) -> None:
    settings = {"memr3_answer_continues": True, "memr3_max_iterations": 1, "memr3_skip_forced_router": True}
    model = scripted([{"answer": "Pixel", "supports": []}])
    out, state = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    assert len(model.calls) == 1 and not any(isinstance(m, AIMessage) for m in model.calls[0]["messages"])
    assert state["memr3_exchange"] is None and out["answer"] == "Pixel"


def test_reply_bounds_tighten_the_routers_grammar(ctx: AllMethodsContext) -> None:
    def caps(settings: dict) -> dict:
        model = scripted([route("answer"), {"answer": "Pixel", "supports": []}])
        run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
        props = router_calls(model)[0]["kwargs"]["response_format"]["schema"]["properties"]
        texts = {k: next(b["maxLength"] for b in props[k]["anyOf"] if b.get("type") == "string")
                 for k in ("retrieval_query", "detailed_answer", "reasoning")}
        return {"evidence": (props["evidence"]["maxItems"], props["evidence"]["items"]["maxLength"]),
                "gaps": (props["gaps"]["maxItems"], props["gaps"]["items"]["maxLength"]), **texts}

    assert caps({"memr3_reply_bounds": False}) == {"evidence": (6, 300), "gaps": (6, 200), "retrieval_query": 200, "detailed_answer": 300,
                        "reasoning": 300}
    assert caps({}) == {"evidence": (6, 160), "gaps": (3, 100), "retrieval_query": 120,
                                                  "detailed_answer": 160, "reasoning": 200}



def test_reply_bounds_cap_the_answer_calls_supports(ctx: AllMethodsContext) -> None:
    for bounded, expected in ((False, (None, None, None)), (True, (150, 6, 16))):
        model = scripted([route("answer"), {"answer": "Pixel", "supports": ["[D1:1] 8 May | Ann: a long line"]}])
        out, _ = run_graph(graph, with_model(ctx, model, memr3_reply_bounds=bounded), "ns", Q)
        props = model.calls[-1]["kwargs"]["response_format"]["schema"]["properties"]
        caps = (props["answer"].get("maxLength"), props["supports"].get("maxItems"),
                props["supports"]["items"].get("maxLength"))
        assert caps == expected and out["supports"] == ["D1:1"]


def test_a_stable_system_message_keeps_the_snippets_a_prefix_after_reflect(ctx: AllMethodsContext) -> None:
    replies = [route("reflect", reasoning="combine the dates"), route("retrieve", retrieval_query="kayak"),
               route("answer"), {"answer": "Pixel", "supports": []}]
    model = scripted(replies)
    run_graph(graph, with_model(ctx, model), "ns", Q)  # on by default
    after_reflect, forced = router_calls(model)[:2]
    assert after_reflect["messages"][0].content == forced["messages"][0].content  # one system message
    assert "must choose" not in forced["messages"][0].content
    first_user, forced_user = str(after_reflect["messages"][1].content), str(forced["messages"][1].content)
    snippets_end = first_user.index("Evidence so far")
    assert forced_user[:snippets_end] == first_user[:snippets_end]  # the snippets: a reusable prefix
    assert forced_user.rstrip().endswith('This step you must choose "retrieve". No other decision is allowed.')
    assert decision_enum(forced) == ["retrieve"]

    spec = scripted(replies)
    run_graph(graph, with_model(ctx, spec, memr3_stable_router_system=False), "ns", Q)
    assert 'must choose "retrieve"' in router_calls(spec)[1]["messages"][0].content  # the spec's layout


def test_earlier_retrievals_come_in_the_order_they_were_made(ctx: AllMethodsContext) -> None:
    """The first retrieval searched with the question alone, so where the budget cuts it is kept first."""
    model = scripted([route("retrieve", retrieval_query="kayak"), route("retrieve", retrieval_query="violin"),
                      route("answer"), {"answer": "Pixel", "supports": []}])
    settings = {"memr3_answer_continues": True, "memr3_answer_snippets": "all", "memr3_top_k": 1}
    out, _ = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    first, second, third = (r["turn_ids"] for r in out["trace"] if r["node"] == "retrieve")
    task = str(model.calls[-1]["messages"][-1].content)
    assert task.index(f"[{first[0]}]") < task.index(f"[{second[0]}]") and f"[{third[0]}]" not in task
    assert out["trace"][-1]["turns_shown"] == third + first + second
