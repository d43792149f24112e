"""MemR3 acceptance behaviours (graphs/memr3/README.md) with a scripted model."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.memr3.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel, scripted
from recollect.memory.chunks import chunk_index, chunk_turns
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.retriever import MaskedRetriever
from recollect.memory.workspace import open_workspace
from recollect.steps import is_no_info
from tests.helpers import make_conversation, nodes, run_graph

TOPICS = [
    "Ann adopted a grey cat named Pixel from the shelter",
    "Bob started learning the violin with a teacher called Rosa",
    "Ann moved to Porto for a job at a bakery",
    "Bob ran the Berlin marathon in under four hours",
    "Ann's sister Clara got married in a lighthouse",
    "Bob bought a red kayak for river trips",
    "Ann planted tomatoes and basil on her balcony",
    "Bob's grandfather taught him to carve wooden birds",
]
Q = "What is the name of Ann's cat?"


def route(decision: str, **extra: Any) -> dict[str, Any]:
    return {"evidence": extra.pop("evidence", []), "gaps": extra.pop("gaps", []), "decision": decision, **extra}


ANSWER = {"answer": "Pixel", "supports": []}


def by_kind(router_reply: dict[str, Any]) -> Any:
    """A reply function: the router reply for router calls, ANSWER for the answer call."""
    return lambda msgs, kw: router_reply if "decision" in json.dumps(kw.get("response_format", {})) else ANSWER


def with_model(ctx: AllMethodsContext, model: ScriptedChatModel, **kw: Any) -> AllMethodsContext:
    return ctx.with_overrides(chat_model=model, **kw)


def router_calls(model: ScriptedChatModel) -> list[dict[str, Any]]:
    return [c for c in model.calls if "decision" in json.dumps(c["kwargs"].get("response_format", {}))]


def decision_enum(call: dict[str, Any]) -> list[str]:
    return call["kwargs"]["response_format"]["schema"]["properties"]["decision"]["enum"]


def test_first_step_is_retrieve_with_the_raw_question(ctx: AllMethodsContext) -> None:
    out, _ = run_graph(graph, with_model(ctx, scripted([route("answer"), ANSWER])), "ns", Q)
    assert out["trace"][0]["node"] == "retrieve"
    assert out["trace"][0]["query_text"] == Q


def test_refinement_is_appended_to_the_question_then_cleared(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", retrieval_query="X"), route("answer"), ANSWER])
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    retrieves = [r for r in out["trace"] if r["node"] == "retrieve"]
    assert retrieves[1]["query_text"] == Q + ". X"
    assert not state.get("query")
    assert state["memr3_queries"][-1] == "X"


def test_a_query_copied_from_the_reply_format_is_not_searched(ctx: AllMethodsContext) -> None:
    copied = "5-15 words naming the missing fact, different from the prior query"
    model = scripted([route("retrieve", retrieval_query=copied), route("answer"), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    retrieves = [r for r in out["trace"] if r["node"] == "retrieve"]
    assert retrieves[1]["query_text"] == Q  # the question alone, as on the first retrieval
    router = next(r for r in out["trace"] if r["node"] == "router")
    assert router["copied_instruction_query"] == copied


def test_masks_grow_by_exactly_the_new_chunks_and_snippets_are_latest_only(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", retrieval_query="violin"), route("retrieve", retrieval_query="kayak"),
                      route("answer"), ANSWER])
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    seen: list[str] = []
    for rec in (r for r in out["trace"] if r["node"] == "retrieve"):
        assert not set(rec["turn_ids"]) & set(seen)
        seen += rec["turn_ids"]
    assert state["masks"] == seen
    last = [r for r in out["trace"] if r["node"] == "retrieve"][-1]
    assert [s["chunk_id"] for s in state["memr3_snippets"]] == last["chunk_ids"]


def test_router_prompt_only_shows_latest_snippets(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", retrieval_query="violin"), route("retrieve", retrieval_query="kayak"),
                      route("answer"), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    turns = open_workspace(ctx.data_dir).turns("ns")
    retrieves = [r for r in out["trace"] if r["node"] == "retrieve"]
    prompts = ["\n".join(str(m.content) for m in c["messages"]) for c in router_calls(model)]
    for i, prompt in enumerate(prompts):
        for j, rec in enumerate(retrieves):
            for tid in rec["turn_ids"]:
                assert (turns[tid].text in prompt) == (i == j), (i, j, tid)


@pytest.mark.parametrize("layout", [False, True])
def test_always_retrieve_hits_the_budget_with_answer_forced_and_announced(ctx: AllMethodsContext, layout: bool) -> None:
    model = scripted(default=by_kind(route("retrieve", retrieval_query="more")))
    out, state = run_graph(graph, with_model(ctx, model, memr3_skip_forced_router=False, memr3_prefix_layout=layout),
                           "ns", Q)
    calls = router_calls(model)
    assert len(calls) == 5 and len(model.calls) == 6
    assert decision_enum(calls[4]) == ["answer"]
    assert 'must choose "answer"' in "\n".join(str(m.content) for m in calls[4]["messages"])
    seq = nodes(out["trace"])
    assert seq[seq.index("router", len(seq) - 3):][:2] == ["router", "answer"]
    assert state["iteration"] == 5 and out["answer"]


def test_reflect_early_forces_the_next_router_to_retrieve(ctx: AllMethodsContext) -> None:
    model = scripted([route("reflect", reasoning="think"), route("reflect"), route("answer"), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    seq = nodes(out["trace"])
    assert seq[:5] == ["retrieve", "router", "reflect", "router", "retrieve"]
    reflect_rec = next(r for r in out["trace"] if r["node"] == "reflect")
    assert reflect_rec["forced_next"] == "retrieve"
    second = router_calls(model)[1]
    assert decision_enum(second) == ["retrieve"]
    assert 'must choose "retrieve"' in "\n".join(str(m.content) for m in second["messages"])


def test_reflect_with_everything_masked_leaves_no_forced_decision(ctx: AllMethodsContext) -> None:
    model = scripted([route("reflect"), route("answer"), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_top_k=50), "ns", Q)
    reflect_rec = next(r for r in out["trace"] if r["node"] == "reflect")
    assert reflect_rec["opportunity"] is False and reflect_rec["forced_next"] is None
    assert nodes(out["trace"])[:5] == ["retrieve", "router", "reflect", "router", "answer"]


def test_empty_retrieval_forces_reflect(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", retrieval_query="again"), route("answer"), route("answer"), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_top_k=50), "ns", Q)
    second_retrieve = [r for r in out["trace"] if r["node"] == "retrieve"][1]
    assert second_retrieve["chunk_ids"] == [] and second_retrieve["forced_next"] == "reflect"
    routers = [r for r in out["trace"] if r["node"] == "router"]
    assert routers[1]["model_decision"] == "answer" and routers[1]["decision"] == "reflect"
    assert decision_enum(router_calls(model)[1]) == ["reflect"]


def test_unknown_decision_is_routed_as_reflect(ctx: AllMethodsContext) -> None:
    model = scripted([route("search"), route("answer"), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert out["trace"][1]["decision"] == "reflect" and out["trace"][1]["unknown_decision"] == "search"
    assert out["trace"][2]["node"] == "reflect"


def test_evidence_is_replaced_not_merged_and_none_gaps_become_empty(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", evidence=["a"], gaps=["x"]), route("answer", evidence=["b"], gaps="None"), ANSWER])
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert state["evidence"] == ["b"] and state["gaps"] == []


def test_invalid_router_json_twice_keeps_tracker_and_falls_back(ctx: AllMethodsContext) -> None:
    model = scripted([route("retrieve", evidence=["[D1:1] kept"], gaps=["g"]), "not json", "{broken", route("answer"), ANSWER])
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    routers = [r for r in out["trace"] if r["node"] == "router"]
    assert routers[1].get("fallback") is True
    assert routers[1]["decision"] == "retrieve"
    assert routers[1]["evidence"] == ["[D1:1] kept"] and routers[1]["gaps"] == ["g"]
    assert out["answer"]


def test_invalid_router_json_without_opportunity_answers(ctx: AllMethodsContext) -> None:
    model = scripted(["junk", "junk", ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_top_k=50), "ns", Q)
    assert [r["decision"] for r in out["trace"] if r["node"] == "router"] == ["answer"]
    assert out["answer"] == "Pixel"


def test_retrieve_and_reflect_never_call_the_llm(ctx: AllMethodsContext) -> None:
    model = scripted([route("reflect"), route("retrieve"), route("reflect")], default=by_kind(route("answer")))
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert "reflect" in nodes(out["trace"]) and "retrieve" in nodes(out["trace"])
    assert set(out["usage"]["by_node"]) == {"router", "answer"}
    assert out["usage"]["calls"] == len(model.calls) <= ctx.memr3_max_iterations + 1


@pytest.mark.parametrize("mode", ["never", "always"])
def test_supports_are_cited_evidence_ids_within_masks(ctx: AllMethodsContext, mode: str) -> None:
    model = scripted([route("answer", evidence=["[D1:1] Ann adopted Pixel", "[D9:9] invented"]),
                      {"answer": "Pixel", "supports": ["[D1:1]", "D9:9", "D2:4"]}])
    out, state = run_graph(graph, with_model(ctx, model, memr3_top_k=50, memr3_answer_snippets=mode), "ns", Q)
    # D2:4 was retrieved but cited by no evidence bullet: citable only when the answer call saw the turns
    assert out["supports"] == (["D1:1"] if mode == "never" else ["D1:1", "D2:4"])
    assert set(out["supports"]) <= set(state["masks"])
    assert out["critical_memories"][0]["id"] == "D1:1" and "Pixel" in out["critical_memories"][0]["text"]


def test_answer_fallback_uses_the_draft(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer", detailed_answer="Pixel the cat"), "???", "???"])
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert out["answer"] == "Pixel the cat"
    assert out["trace"][-1].get("fallback") is True
    assert state["memr3_router_fallback"] is False  # the router's reply was fine; the answer call's was not


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["retrieve", "reflect", "answer", "search", "BAD"]), min_size=0, max_size=12))
def test_any_decision_sequence_terminates_with_an_answer(ctx: AllMethodsContext, decisions: list[str]) -> None:
    replies: list[Any] = [("not json" if d == "BAD" else route(d, retrieval_query=f"q{i}")) for i, d in enumerate(decisions)]
    model = scripted(replies, default=by_kind(route("reflect")))
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q, recursion_limit=20)
    assert out["answer"].strip() and not out["answer"].lstrip().startswith(("{", "["))
    assert state["iteration"] <= 5
    assert set(out["supports"]) <= set(state["masks"])


def test_ingestion_chunks_are_turn_aligned_and_idempotent(data_dir: str) -> None:
    conv = make_conversation([[("Ann", t) for t in TOPICS[:5]], [("Bob", t) for t in TOPICS[5:]]],
                             captions={"D2:1": "a red kayak"})
    units = chunk_turns(conv, 40)
    all_ids = [t for u in units for t in u.turn_ids]
    assert sorted(all_ids) == sorted(t.id for t in conv.turns) and len(all_ids) == len(set(all_ids))
    assert all(len({t.split(":")[0] for t in u.turn_ids}) == 1 for u in units)
    assert any("[shared image: a red kayak]" in u.text for u in units)
    model = scripted()
    ctx = AllMethodsContext(data_dir=data_dir, memr3_chunk_tokens=40, chat_model=model)
    first = ingest_conversation(conv, "ns", ctx, methods=["memr3"])
    again = ingest_conversation(conv, "ns", ctx, methods=["memr3"])
    assert first[1].embedded == len(units) and again[1].embedded == 0 and again[0].embedded == 0
    assert chunk_index(open_workspace(data_dir), "ns", ctx).count() == len(units)
    assert model.calls == []


def test_dense_order_is_exact_cosine_order(ctx: AllMethodsContext) -> None:
    index = chunk_index(open_workspace(ctx.data_dir), "ns", ctx)
    got = MaskedRetriever(index, candidate_k=20, rerank="none").retrieve(Q, [], 5)
    units = index.all()
    emb = HashEmbeddings()
    sims = np.array(emb.embed_documents([u.text for u in units])) @ np.array(emb.embed_query(Q))
    expected = [units[i].id for i in np.argsort(-sims, kind="stable")[:5]]
    assert [u.id for u in got] == expected


def test_hybrid_lets_a_bm25_only_chunk_into_the_top_k(data_dir: str) -> None:
    # One chunk shares a rare keyword with the query but little else; dense search ranks it low.
    filler = [("Ann", f"we talked about the weather and the garden and the weather again {i}") for i in range(12)]
    conv = make_conversation([filler + [("Bob", "zyzzyva")]])
    ctx = AllMethodsContext(data_dir=data_dir, memr3_chunk_tokens=10)
    ingest_conversation(conv, "ns", ctx, methods=["memr3"])
    index = chunk_index(open_workspace(data_dir), "ns", ctx)
    query = "what did we say about the weather and the garden zyzzyva"
    rare = next(u.id for u in index.all() if "zyzzyva" in u.text)
    dense = MaskedRetriever(index, candidate_k=3, rerank="none").retrieve(query, [], 2)
    hybrid = MaskedRetriever(index, candidate_k=3, rerank="hybrid").retrieve(query, [], 2)
    assert rare not in [u.id for u in dense]
    assert rare in [u.id for u in hybrid]


def test_supports_fall_back_to_shown_turns_containing_the_answer(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer", evidence=["Ann adopted a cat"]), {"answer": "Pixel", "supports": []}])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_top_k=50), "ns", Q)
    assert out["supports"] == ["D1:1"]
    assert out["trace"][-1]["supports_from"] == "answer text found in shown turns"


def test_router_schema_caps_free_text_so_a_grammar_cannot_loop(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer"), ANSWER])
    run_graph(graph, with_model(ctx, model, memr3_require_tracker=True), "ns", Q)
    props = router_calls(model)[0]["kwargs"]["response_format"]["schema"]["properties"]
    for name in ("reasoning", "detailed_answer", "retrieval_query"):
        string = next(b for b in props[name]["anyOf"] if b.get("type") == "string")
        assert 0 < string["maxLength"] <= 300, name
    # required lists (memr3_require_tracker) are capped tighter: together under the call's budget
    assert props["evidence"]["maxItems"] == 4 and props["evidence"]["items"]["maxLength"] == 160
    assert props["gaps"]["maxItems"] == 3 and props["gaps"]["items"]["maxLength"] == 100
    model = scripted([route("answer"), ANSWER])
    run_graph(graph, with_model(ctx, model, memr3_require_tracker=False, memr3_reply_bounds=False), "ns", Q)
    props = router_calls(model)[0]["kwargs"]["response_format"]["schema"]["properties"]
    assert props["evidence"]["maxItems"] == 6 and props["evidence"]["items"]["maxLength"] == 300


@pytest.mark.parametrize(("overrides", "required"), [
    ({"memr3_require_tracker": True}, ["evidence", "gaps", "decision"]),
    ({}, ["decision"]),  # the default
    ({"profile": "paper"}, ["decision"]),
])
def test_router_schema_requires_the_tracker_before_the_decision(ctx: AllMethodsContext, overrides: dict[str, Any],
                                                                required: list[str]) -> None:
    model = scripted([route("retrieve"), route("answer"), ANSWER])
    run_graph(graph, with_model(ctx, model, **overrides), "ns", Q)
    calls = router_calls(model)
    assert calls
    for call in calls:
        schema = call["kwargs"]["response_format"]["schema"]
        # a grammar writes the required properties first, in this order: the lists, then the decision
        assert schema["required"] == required
        assert list(schema["properties"])[:3] == ["evidence", "gaps", "decision"]


@pytest.mark.parametrize("mode", ["never", "when_thin", "always"])
def test_answer_snippets_setting(ctx: AllMethodsContext, mode: str) -> None:
    # the router answers with evidence that cites a shown turn but misses the fact; only the snippets hold it
    model = scripted([route("answer", evidence=["[D1:2] Bob plays violin"]), {"answer": "Pixel", "supports": ["D1:1"]}])
    # the answer call's own prompt (test_prompt_reuse.py covers the continued one)
    settings = {"memr3_answer_snippets": mode, "memr3_top_k": 50, "memr3_answer_continues": False}
    out, state = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    prompt = str(model.calls[-1]["messages"][-1].content)
    assert ("grey cat named Pixel" in prompt) is (mode == "always")  # "when_thin": the evidence is not thin
    assert "[D1:2] Bob plays violin" in prompt
    assert "D1:1" in state["masks"]
    # a snippet's turn is taken as cited only when the snippets were shown; otherwise the citation is
    # dropped and the supports are the evidence's ids
    assert out["supports"] == (["D1:1"] if mode == "always" else ["D1:2"])


def answers_only_from(fact: str, answer: str) -> Any:
    """A model whose router writes no evidence and whose answer call finds `answer` only when `fact` is shown."""

    def reply(msgs: list[Any], kw: dict[str, Any]) -> Any:
        if "decision" in json.dumps(kw.get("response_format", {})):
            return route("answer")
        found = fact in str(msgs[-1].content)
        return {"answer": answer if found else "No information available", "supports": ["D1:1"] if found else []}

    return reply


@pytest.mark.parametrize("mode", ["never", "when_thin", "always"])
def test_answer_comes_from_the_snippets_when_the_router_gave_no_evidence(ctx: AllMethodsContext, mode: str) -> None:
    model = scripted(default=answers_only_from("grey cat named Pixel", "Pixel"))
    settings = {"memr3_answer_snippets": mode, "memr3_answer_continues": False}  # the answer call's own prompt
    out, state = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    assert state["evidence"] == []
    if mode == "never":  # the spec: the answer call sees the (empty) evidence only
        assert out["answer"] == "No information available" and out["supports"] == []
    else:
        assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]
        assert "D1:1" in out["trace"][-1]["turns_shown"]


def test_when_thin_shows_the_turns_after_an_unusable_last_router_reply(ctx: AllMethodsContext) -> None:
    """The evidence cites a shown turn, but the last router reply could not be parsed: "when_thin"
    then shows the turns too (the router's fallback is read from the typed state, not the trace)."""
    model = scripted([route("retrieve", evidence=["[D1:1] Ann adopted Pixel"]), "not json", "{broken", ANSWER])
    settings = {"memr3_max_iterations": 2, "memr3_answer_snippets": "when_thin"}
    out, state = run_graph(graph, with_model(ctx, model, **settings), "ns", Q)
    assert [r.get("fallback") for r in out["trace"] if r["node"] == "router"] == [None, True]
    assert state["memr3_router_fallback"] is True and state["evidence"] == ["[D1:1] Ann adopted Pixel"]
    assert out["trace"][-1]["thin_evidence"] is True and out["trace"][-1]["turns_shown"] is not None


def test_turns_cited_in_earlier_evidence_are_shown_to_the_answer_call(ctx: AllMethodsContext) -> None:
    # the evidence cites D1:1 from the first retrieval; the second retrieval's snippets replace the first's
    model = scripted([route("retrieve", evidence=["[D1:1] Ann's cat"], retrieval_query="kayak"),
                      route("answer", evidence=["[D1:1] Ann's cat"]), {"answer": "Pixel", "supports": ["D1:1"]}])
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert "D1:1" not in {t for s in state["memr3_snippets"] for t in s["turn_ids"]}
    prompt = str(model.calls[-1]["messages"][-1].content)
    assert "Ann adopted a grey cat named Pixel from the shelter" in prompt
    assert out["supports"] == ["D1:1"] and "D1:1" in out["trace"][-1]["turns_shown"]


@pytest.mark.parametrize("prefer", [True, False])
def test_a_grounded_draft_beats_no_information(ctx: AllMethodsContext, prefer: bool) -> None:
    model = scripted([route("answer", detailed_answer="Pixel, a grey cat"), {"answer": "No information available"}])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_prefer_grounded_draft=prefer), "ns", Q)
    assert out["answer"] == ("Pixel, a grey cat" if prefer else "No information available")


def test_an_ungrounded_draft_does_not_beat_no_information(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer", detailed_answer="Rex the labrador"), {"answer": "no information available."}])
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert out["answer"] == "No information available"


@pytest.mark.parametrize("raw", ['{"supports": ["D1:1"]}', '```json\n{"answer": {"text": "x"}}\n```'])
def test_a_json_only_answer_reply_is_never_the_answer(ctx: AllMethodsContext, raw: str) -> None:
    model = scripted([route("answer"), raw, raw])
    out, _ = run_graph(graph, with_model(ctx, model), "ns", Q)
    assert out["answer"] == "No information available"
    assert out["trace"][-1]["answer_from"] in ("no info", "answer call")


@pytest.mark.parametrize("keep", [True, False])
def test_cited_evidence_dropped_by_the_router_is_kept(ctx: AllMethodsContext, keep: bool) -> None:
    model = scripted([route("retrieve", evidence=["[D1:1] Ann adopted Pixel", "uncited note"], retrieval_query="v"),
                      route("answer", evidence=["[D9:9] something else"]), ANSWER])
    out, state = run_graph(graph, with_model(ctx, model, memr3_keep_cited_evidence=keep), "ns", Q)
    assert "D1:1" in state["masks"]
    assert state["evidence"] == ["[D9:9] something else"] + (["[D1:1] Ann adopted Pixel"] if keep else [])
    answer_prompt = str(model.calls[-1]["messages"][-1].content)
    assert ("[D1:1] Ann adopted Pixel" in answer_prompt) is keep


def test_budget_call_is_answer_without_a_budget_note(ctx: AllMethodsContext) -> None:
    model = scripted(default=by_kind(route("retrieve", gaps=["still missing"], retrieval_query="more")))
    out, state = run_graph(graph, with_model(ctx, model), "ns", Q)
    last_router = [r for r in out["trace"] if r["node"] == "router"][-1]
    assert last_router["decision"] == "answer" and last_router["forced"] == "answer"
    assert state["gaps"] == ["still missing"]  # the model's own gaps


def custom_id_conversation() -> Conversation:
    turns = [("ann-cat", "Ann", "I adopted a grey cat named Pixel"), ("bob-q1", "Bob", "What does Pixel eat?"),
             ("ann-2", "Ann", "Mostly tuna, and she hates carrots")]
    built = tuple(Turn(id=i, speaker=spk, text=t, session=1, index=k, date_time="1 May, 2023")
                  for k, (i, spk, t) in enumerate(turns, start=1))
    return Conversation(id="custom", speakers=("Ann", "Bob"), sessions=(Session(1, "1 May, 2023", None, built),))


def test_custom_turn_ids_come_back_as_supports(data_dir: str) -> None:
    c = AllMethodsContext(data_dir=data_dir, memr3_rerank="none")
    ingest_conversation(custom_id_conversation(), "c", c, methods=["memr3"])
    model = scripted([route("answer", evidence=["[ann-cat] Ann's cat is Pixel", "bob-q1 asks about food"]),
                      {"answer": "Pixel", "supports": "[ann-cat], BOB-Q1, ann"}])
    out, _ = run_graph(graph, c.with_overrides(chat_model=model), "c", Q)
    assert out["supports"] == ["ann-cat", "bob-q1"]
    assert [m["id"] for m in out["critical_memories"]] == ["ann-cat", "bob-q1"]


class ListRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Document]:
        return list(self.docs)


def test_an_external_retrievers_ids_give_supports_and_critical_memories(data_dir: str) -> None:
    docs = [Document(page_content="[zed-1] Zed: I live in Oslo", id="zed-1"),
            Document(page_content="[zed-2] Zed: my cat is called Mo", id="zed-2")]
    model = scripted([route("answer", evidence=["[zed-1] Zed lives in Oslo"]), {"answer": "Oslo", "supports": ["zed-1"]}])
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, retriever=ListRetriever(docs=docs))
    out, _ = run_graph(graph, ctx, "ext", "Where does Zed live?")
    assert out["answer"] == "Oslo" and out["supports"] == ["zed-1"]
    assert out["critical_memories"] == [{"id": "zed-1", "text": "[zed-1] Zed: I live in Oslo"}]


def test_a_second_question_on_the_same_thread_starts_fresh(ctx: AllMethodsContext) -> None:
    model = scripted(default=by_kind(route("retrieve", evidence=["[D1:1] Ann adopted Pixel"], retrieval_query="more")))
    g = graph.builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "same"}, "recursion_limit": 30}
    g.invoke({"namespace": "ns", "question": Q}, config, context=with_model(ctx, model))
    first = g.get_state(config).values
    g.invoke({"namespace": "ns", "question": "Which city did Ann move to?"}, config, context=with_model(ctx, model))
    second = g.get_state(config).values
    assert first["iteration"] == second["iteration"] == 5  # the budget is not already spent
    assert [r["query_text"] for r in second["trace"] if r["node"] == "retrieve"][0] == "Which city did Ann move to?"
    assert [m.content for m in second["messages"] if m.type == "human"] == [Q, "Which city did Ann move to?"]


def test_answer_rewrite_turns_the_answer_into_a_dated_span(ctx: AllMethodsContext) -> None:
    """`memr3_answer_rewrite`: one more call, shown the cited turns with their dates; the trace keeps
    the answer call's reply as `draft`. A no-information answer makes no rewrite call."""
    model = scripted([route("answer", evidence=["[D1:1] Ann adopted Pixel"]),
                      {"answer": "last week", "supports": ["D1:1"]}, {"answer": "24 April 2023"}])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_answer_rewrite=True), "ns", Q)
    assert out["answer"] == "24 April 2023" and out["supports"] == ["D1:1"]
    record = out["trace"][-1]
    assert record["node"] == "answer" and record["draft"] == "last week"
    assert out["answer_before_rewrite"] == "last week"  # the typed state says what the trace says
    rewrite_prompt = model.prompts()[-1]
    assert "Draft answer: last week" in rewrite_prompt and "[D1:1] (10:00 am on 1 May, 2023)" in rewrite_prompt
    assert len(model.calls) == 3

    none = scripted([route("answer"), {"answer": "No information available", "supports": []}])
    out, _ = run_graph(graph, with_model(ctx, none, memr3_answer_rewrite=True), "ns", Q)
    assert is_no_info(out["answer"]) and len(none.calls) == 2 and "draft" not in out["trace"][-1]
    assert out["answer_before_rewrite"] is None


def test_a_rewrite_that_drops_the_answer_keeps_it(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer"), {"answer": "Pixel", "supports": ["D1:1"]},
                      {"answer": "No information available"}])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_answer_rewrite=True), "ns", Q)
    assert out["answer"] == "Pixel" and out["trace"][-1]["fallback_rule"].startswith("the rewrite dropped")


@pytest.mark.parametrize(("tracker", "required"), [
    (False, ["decision", "detailed_answer"]),
    (True, ["evidence", "gaps", "decision", "detailed_answer"]),
])
def test_answer_from_router_requires_a_short_draft_after_the_decision(ctx: AllMethodsContext, tracker: bool,
                                                                      required: list[str]) -> None:
    model = scripted([route("answer", detailed_answer="Pixel"), ANSWER])
    run_graph(graph, with_model(ctx, model, memr3_answer_from_router=True, memr3_require_tracker=tracker), "ns", Q)
    schema = router_calls(model)[0]["kwargs"]["response_format"]["schema"]
    assert schema["required"] == required
    draft = next(b for b in schema["properties"]["detailed_answer"]["anyOf"] if b.get("type") == "string")
    assert draft["maxLength"] == 120


def test_answer_from_router_needs_no_draft_where_the_router_may_not_answer(ctx: AllMethodsContext) -> None:
    """After an early reflect the next router call may only retrieve: its schema asks for no draft."""
    model = scripted([route("reflect", reasoning="think"), route("retrieve"), route("answer", detailed_answer="Pixel")])
    run_graph(graph, with_model(ctx, model, memr3_answer_from_router=True), "ns", Q)
    calls = router_calls(model)
    assert decision_enum(calls[1]) == ["retrieve"]
    assert calls[1]["kwargs"]["response_format"]["schema"]["required"] == ["decision"]
    assert calls[2]["kwargs"]["response_format"]["schema"]["required"] == ["decision", "detailed_answer"]


def test_a_grounded_router_draft_is_the_answer_with_no_answer_call(ctx: AllMethodsContext) -> None:
    model = scripted([route("answer", evidence=["[D1:1] Ann adopted a grey cat named Pixel"],
                            detailed_answer="Pixel")])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_answer_from_router=True), "ns", Q)
    assert len(model.calls) == 1 and out["answer"] == "Pixel"
    assert out["supports"] == ["D1:1"]
    assert out["trace"][-1]["answer_from"].startswith("router draft")


@pytest.mark.parametrize(("on", "draft", "calls"), [
    (True, "Rex the labrador", 2),  # not found in what the router was shown: the answer call decides
    (True, "", 2),  # no draft
    (False, "Pixel", 2),  # the default: the paper's answer call, whatever the draft
])
def test_otherwise_the_answer_call_is_made(ctx: AllMethodsContext, on: bool, draft: str, calls: int) -> None:
    model = scripted([route("answer", detailed_answer=draft), ANSWER])
    out, _ = run_graph(graph, with_model(ctx, model, memr3_answer_from_router=on), "ns", Q)
    assert len(model.calls) == calls and out["answer"] == "Pixel"
    assert out["trace"][-1]["answer_from"] == "answer call"


def test_two_router_calls_by_default_and_five_in_the_paper(ctx: AllMethodsContext) -> None:
    assert AllMethodsContext().memr3_max_iterations == 2 and AllMethodsContext(profile="paper").memr3_max_iterations == 5
    model = ScriptedChatModel(default=lambda messages, kwargs: {"evidence": [], "gaps": ["more"], "decision": "retrieve",
                                                                "retrieval_query": "more", "answer": "x",
                                                                "supports": []})
    out, _ = run_graph(graph, ctx.with_overrides(chat_model=model, memr3_max_iterations=3), "ns", "What did Ann adopt?")
    routers = [r for r in out["trace"] if r["node"] == "router"]
    assert len(routers) == 3 and routers[-1]["decision"] == "answer" and routers[-1]["forced"] == "answer"
    assert len([c for c in model.calls if "RouterDecision" in json.dumps(c["kwargs"].get("response_format"))]) <= 3
