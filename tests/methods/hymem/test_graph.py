"""HyMem graph acceptance behaviours (graphs/hymem/README.md) with a scripted model.

Each test names the behaviour it checks (`test_b<N>_…`). Replies are routed by the JSON schema the
node asks for, so one fake answers every kind of call in any order (deep batches run concurrently).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.hymem.graph import graph, route_after_light, route_after_reflect
from recollect.graphs.hymem.memory import load_sessions, load_summaries
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import open_workspace
from recollect.steps import NO_INFO
from tests.helpers import make_conversation, nodes, run_graph

LINE = re.compile(r"^\[(D\d+:\d+)\] ([^:\n]+): (.*)$", re.M)
NUMBERED = re.compile(r"^id: (\d+), time: [^,]+(?:, \d{4})?, (.*)$", re.M)
Q = "What is the name of Ann's cat?"

TOPICS = [
    [("Ann", "I adopted a grey cat named Pixel"), ("Bob", "Pixel is a cute name"), ("Ann", "Pixel sleeps all day")],
    [("Bob", "I ran the Berlin marathon"), ("Ann", "How long did the marathon take"), ("Bob", "Under four hours")],
    [("Ann", "I moved to Porto for a bakery job"), ("Bob", "Porto has great bakeries")],
    [("Bob", "My grandfather taught me to carve wooden birds"), ("Ann", "Carving birds sounds calming")],
]


def per_turn_summaries(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {"items": [{"text": f"{s} said: {t}", "turn_ids": [i]} for i, s, t in LINE.findall(messages[-1].content)]}


def kind(call: dict[str, Any]) -> str:
    return call["kwargs"]["response_format"]["schema"]["title"]


class Fake:
    """Replies by call kind: a value, a list consumed in order (last one repeats), or a callable."""

    def __init__(self, **replies: Any) -> None:
        self.replies = {k: (list(v) if isinstance(v, list) else v) for k, v in replies.items()}

    def __call__(self, messages: list[Any], kwargs: dict[str, Any]) -> Any:
        k = kwargs["response_format"]["schema"]["title"]
        r = self.replies.get(k)
        if isinstance(r, list):
            r = r.pop(0) if len(r) > 1 else r[0]
        if callable(r):
            return r(messages, kwargs)
        return r


LIGHT_OK = {"finished": 0, "answer": "Pixel"}
LIGHT_NO = {"finished": 2, "answer": ""}
SATISFIED = {"finished": 1, "new_question": ""}
DEEP_OK = {"answer": "Pixel", "supports": ["D1:1"]}


def model(**replies: Any) -> ScriptedChatModel:
    defaults = {"LightReply": LIGHT_OK, "LightTurnsReply": LIGHT_OK, "SelectReply": {"selected": [0]}, "DeepReply": DEEP_OK,
                "ReflectReply": SATISFIED}
    return ScriptedChatModel(default=Fake(**{**defaults, **replies}))


def build_store(data_dir: str, sessions: list[list[tuple[str, str]]], ns: str = "ns") -> AllMethodsContext:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default=per_turn_summaries))
    ingest_conversation(make_conversation(sessions), ns, ctx, methods=["hymem"])
    return ctx


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    return build_store(data_dir, TOPICS)


def run(ctx: AllMethodsContext, m: ScriptedChatModel, question: str = Q, **overrides: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One question; the light call reads summaries (the spec's, `hymem_light_turn_tokens=0`) unless overridden:
    these tests are about the summaries, test_light_turns.py about the turns. The draft is the answer (the
    spec's `answer`, `hymem_final_answer_tokens=0`) unless overridden: test_final_answer.py tests the final call."""
    overrides.setdefault("hymem_light_turn_tokens", 0)
    overrides.setdefault("hymem_final_answer_tokens", 0)
    return run_graph(graph, ctx.with_overrides(chat_model=m, **overrides), "ns", question)


def calls_of(m: ScriptedChatModel, k: str) -> list[dict[str, Any]]:
    return [c for c in m.calls if kind(c) == k]


def prompt(call: dict[str, Any]) -> str:
    return "\n".join(str(x.content) for x in call["messages"])


def records(out: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return [r for r in out["trace"] if r["node"] == node]


def cosine_order(data_dir: str, query: str) -> list[str]:
    """Every summary id by descending cosine to `query` (ties in corpus order), computed independently."""
    summaries = load_summaries(open_workspace(data_dir), "ns")
    emb = HashEmbeddings()
    vecs = np.asarray(emb.embed_documents([s["text"] for s in summaries.values()]))
    scores = vecs @ np.asarray(emb.embed_query(query))
    order = sorted(range(len(scores)), key=lambda i: (-round(float(scores[i]), 5), i))
    return [list(summaries)[i] for i in order]


def select_by_text(*needles: str) -> Callable[[list[Any], dict[str, Any]], dict[str, Any]]:
    """A selection reply picking the numbered lines whose summary contains each needle, in that order."""

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        lines = NUMBERED.findall(messages[-1].content)
        return {"selected": [int(i) for n in needles for i, text in lines if n in text]}

    return reply


# --- 2. light shows min(light_k, #summaries) in cosine order with session dates -----------------


@pytest.mark.parametrize("k", [3, 50])
def test_b2_light_shows_top_k_summaries_in_cosine_order_with_dates(ctx: AllMethodsContext, data_dir: str, k: int) -> None:
    m = model()
    out, state = run(ctx, m, hymem_light_k=k)
    total = len(load_summaries(open_workspace(data_dir), "ns"))
    expected = cosine_order(data_dir, Q)[: min(k, total)]
    assert state["hymem_light_ids"] == expected
    summaries = load_summaries(open_workspace(data_dir), "ns")
    lines = [f"id: {n}, time: {summaries[i]['date']}, {summaries[i]['text']}" for n, i in enumerate(expected)]
    assert state["evidence"] == lines
    assert "\n".join(lines) in prompt(calls_of(m, "LightReply")[0])
    assert all("May, 2023" in line for line in lines)


# --- 3. answered by light → reflect, no deep call ------------------------------------------------


def test_b3_light_answer_goes_to_reflect_without_deep(ctx: AllMethodsContext) -> None:
    m = model()
    out, state = run(ctx, m)
    assert nodes(out["trace"]) == ["light", "reflect", "answer"]
    assert state["hymem_route"] == "reflect" and route_after_light(state) == "reflect"
    assert route_after_light({**state, "hymem_route": "deep"}) == "deep"  # type: ignore[typeddict-item]
    assert not calls_of(m, "SelectReply") and not calls_of(m, "DeepReply")
    assert out["answer"] == "Pixel" and state["hymem_status"] == "light"
    assert records(out, "answer")[0]["answered_by"] == "light"


def test_b3_finished_zero_with_empty_answer_is_insufficient(ctx: AllMethodsContext) -> None:
    m = model(LightReply={"finished": "0", "answer": "  "})
    out, _ = run(ctx, m)
    assert nodes(out["trace"])[:2] == ["light", "deep"]


# --- 4. insufficient → deep sees exactly the top deep_n, numbered 0..N−1 -------------------------


def test_b4_insufficient_goes_to_deep_with_top_n_numbered(ctx: AllMethodsContext, data_dir: str) -> None:
    m = model(LightReply=LIGHT_NO)
    out, state = run(ctx, m, hymem_deep_n=6)
    assert nodes(out["trace"])[:3] == ["light", "deep", "reflect"]
    sel = calls_of(m, "SelectReply")
    assert len(sel) == 1
    expected = cosine_order(data_dir, Q)[:6]
    assert state["hymem_deep_candidates"] == expected
    numbered = NUMBERED.findall(prompt(sel[0]))
    assert [int(i) for i, _ in numbered] == list(range(6))
    texts = load_summaries(open_workspace(data_dir), "ns")
    assert [t for _, t in numbered] == [texts[i]["text"] for i in expected]
    assert Q in prompt(sel[0])


@pytest.mark.parametrize("parallel", [True, False])
def test_b4_deep_n_120_in_batches_of_50_50_20(data_dir: str, parallel: bool) -> None:
    sessions = [[("Ann" if k % 2 else "Bob", f"topic {s} item {k} about hobby{s * 50 + k}") for k in range(45)]
                for s in range(3)]
    ctx = build_store(data_dir, sessions)
    m = model(LightReply=LIGHT_NO)
    out, state = run(ctx, m, hymem_deep_n=120, hymem_deep_batch=50, hymem_parallel_batches=parallel)
    sizes = sorted((len(NUMBERED.findall(prompt(c))) for c in calls_of(m, "SelectReply")), reverse=True)
    assert sizes == [50, 50, 20]
    assert len(state["hymem_deep_candidates"]) == 120
    assert [b["size"] for b in records(out, "deep")[0]["batches"]] == [50, 50, 20]
    # Batches partition the candidates: each batch numbered from 0, and its selection maps back in order.
    assert state["hymem_selected_ids"] == [state["hymem_deep_candidates"][i] for i in (0, 50, 100)]


# --- 5. invalid light JSON twice → deep runs, answer not empty -----------------------------------


def test_b5_invalid_light_json_twice_escalates_to_deep(ctx: AllMethodsContext) -> None:
    m = model(LightReply="this is not json", DeepReply={"answer": "Pixel the cat", "supports": []})
    out, _ = run(ctx, m)
    assert len(calls_of(m, "LightReply")) == 2  # the call and its one retry
    assert "deep" in nodes(out["trace"])
    light = records(out, "light")[0]
    assert light["fallback"] is True and "invalid" in light["why"]
    assert out["answer"] == "Pixel the cat"


# --- 6. selection filtering and the empty-selection fallback -------------------------------------


def test_b6_selection_keeps_only_valid_unique_indices(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, SelectReply={"selected": [3, 3, 99, "x"]})
    out, state = run(ctx, m)
    assert state["hymem_selected_ids"] == [state["hymem_deep_candidates"][3]]
    note = records(out, "deep")[0]["batches"][0]
    assert "fallback" not in note


@pytest.mark.parametrize("reply", [{"selected": []}, {"selected": [99, -1]}, "garbage"])
def test_b6_empty_or_invalid_selection_uses_top5_of_batch(ctx: AllMethodsContext, reply: Any) -> None:
    m = model(LightReply=LIGHT_NO, SelectReply=reply)
    out, state = run(ctx, m)
    assert state["hymem_selected_ids"] == state["hymem_deep_candidates"][:5]
    assert records(out, "deep")[0]["batches"][0]["fallback"]


# --- 7. deep context: selected sessions, dedup, first-selection order, cap, masks -----------------


def test_b7_deep_context_sessions_in_first_selection_order_capped_and_masked(ctx: AllMethodsContext, data_dir: str) -> None:
    m = model(LightReply=LIGHT_NO, SelectReply=select_by_text("Porto", "Pixel", "grey cat", "marathon", "carve"))
    out, state = run(ctx, m, hymem_deep_max_sessions=3)
    sessions = load_sessions(open_workspace(data_dir), "ns")
    assert state["hymem_sessions_shown"] == ["S3", "S1", "S2"]  # S1 selected twice, S4 over the cap
    deep_prompt = prompt(calls_of(m, "DeepReply")[0])
    for sid in ("S3", "S1", "S2"):
        assert sessions[sid]["text"] in deep_prompt
    assert deep_prompt.index(sessions["S3"]["text"]) < deep_prompt.index(sessions["S1"]["text"])
    assert deep_prompt.count("I adopted a grey cat named Pixel") == 1
    assert sessions["S4"]["text"] not in deep_prompt
    expected_masks = [t for sid in ("S3", "S1", "S2") for t in sessions[sid]["turn_ids"]]
    assert state["masks"] == expected_masks
    assert records(out, "deep")[0]["shown_turn_ids"] == expected_masks
    assert records(out, "deep")[0]["sessions_dropped"] == ["S4"]


def test_b7_prompt_budget_limits_sessions(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, SelectReply=select_by_text("Porto", "Pixel", "marathon"))
    out, state = run(ctx, m, max_prompt_tokens=720)
    assert 1 <= len(state["hymem_sessions_shown"]) < 3
    assert records(out, "deep")[0]["sessions_dropped"]


def test_b7_deep_supports_restricted_to_shown_sessions(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, SelectReply=select_by_text("marathon"),
              DeepReply={"answer": "Berlin", "supports": ["D2:1", "D1:1", "D77:1"]})
    out, state = run(ctx, m)
    assert out["supports"] == ["D2:1"]
    m2 = model(LightReply=LIGHT_NO, SelectReply=select_by_text("marathon"), DeepReply={"answer": "Berlin"})
    out2, _ = run(ctx, m2)
    assert out2["supports"] and set(out2["supports"]) <= {"D2:1", "D2:2", "D2:3"}  # linked from the selection


# --- 8. generators see q0; round 2 retrieves with the rewrite and shows the previous answer --------


def test_b8_round_two_uses_rewritten_query_and_memory_pool(ctx: AllMethodsContext, data_dir: str) -> None:
    q2 = "Which city did Ann move to for the bakery job?"
    m = model(LightReply=[LIGHT_NO, LIGHT_NO], DeepReply=[{"answer": "Pixel", "supports": []},
                                                          {"answer": "Porto", "supports": []}],
              ReflectReply={"finished": 0, "new_question": q2})
    out, state = run(ctx, m, hymem_light_k=3, hymem_deep_n=4)
    lights = calls_of(m, "LightReply")
    deeps = calls_of(m, "DeepReply")
    sels = calls_of(m, "SelectReply")
    assert len(lights) == 2 and len(deeps) == 2 and len(sels) == 2
    # Algorithm 1, line 10: the selection call (a retriever) gets q_i, the generators get q0
    assert f"Question: {Q}" in prompt(sels[0]) and f"Question: {q2}" in prompt(sels[1])
    assert Q not in prompt(sels[1])
    for c in lights + deeps:
        assert f"Question: {Q}" in prompt(c)
        assert q2 not in prompt(c)
    light2 = records(out, "light")[1]
    assert light2["query"] == q2 and light2["summary_ids"] == cosine_order(data_dir, q2)[:3]
    assert records(out, "deep")[1]["query"] == q2
    assert "previous answer: Pixel" in prompt(lights[1])
    assert "previous answer: Pixel" in prompt(deeps[1])
    assert "previous answer" not in prompt(lights[0])
    assert state["evidence"][-1] == "previous answer: Pixel"


# --- 9. reflect routing ----------------------------------------------------------------------------


def test_b9_reflect_rewrite_goes_back_to_light(ctx: AllMethodsContext) -> None:
    m = model(ReflectReply={"finished": 0, "new_question": "Q2"})
    out, state = run(ctx, m)
    assert nodes(out["trace"]) == ["light", "reflect", "light", "reflect", "answer"]
    assert state["query"] == "Q2" and state["iteration"] == 1
    assert state["hymem_reflections"] == [{"round": 0, "satisfied": False, "new_question": "Q2"}]
    assert [r["next"] for r in records(out, "reflect")] == ["light", "answer"]
    assert route_after_reflect(state) == "answer"  # the last reflect made no call and ended the rounds
    assert route_after_reflect({**state, "hymem_next": "light"}) == "light"  # type: ignore[typeddict-item]


def test_b9_reflect_satisfied_goes_to_answer(ctx: AllMethodsContext) -> None:
    m = model(ReflectReply={"finished": "1"})
    out, state = run(ctx, m)
    assert nodes(out["trace"]) == ["light", "reflect", "answer"]
    assert state["iteration"] == 0 and state["query"] == Q


@pytest.mark.parametrize("reply", [{"finished": 0, "new_question": ""}, {"finished": 0, "new_question": Q.upper()},
                                   "garbage"])
def test_b9_unusable_reflection_stops(ctx: AllMethodsContext, reply: Any) -> None:
    m = model(ReflectReply=reply)
    out, state = run(ctx, m)
    assert nodes(out["trace"]) == ["light", "reflect", "answer"]
    assert out["answer"] == "Pixel" and state["iteration"] == 0


# --- 10. round budget --------------------------------------------------------------------------------


def test_b10_never_satisfied_gives_two_light_calls_and_one_reflect(ctx: AllMethodsContext) -> None:
    m = model(ReflectReply={"finished": 0, "new_question": "something else entirely"})
    out, _ = run(ctx, m, hymem_max_rounds=2)
    assert len(calls_of(m, "LightReply")) == 2 and len(calls_of(m, "ReflectReply")) == 1
    assert records(out, "reflect")[-1]["calls"] == 0


def test_b10_max_rounds_one_never_reflects(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO)
    out, _ = run(ctx, m, hymem_max_rounds=1)
    assert not calls_of(m, "ReflectReply")
    assert nodes(out["trace"]) == ["light", "deep", "reflect", "answer"]


# --- 11. sessions shown in round 1 are not re-sent in round 2 ---------------------------------------


def test_b11_round_two_skips_sessions_already_shown(ctx: AllMethodsContext, data_dir: str) -> None:
    m = model(LightReply=LIGHT_NO, SelectReply=select_by_text("Pixel", "marathon"),
              ReflectReply={"finished": 0, "new_question": "Tell me more about Pixel and the marathon"})
    out, state = run(ctx, m, hymem_deep_max_sessions=1)
    deeps = records(out, "deep")
    sessions = load_sessions(open_workspace(data_dir), "ns")
    assert deeps[0]["sessions_shown"] == ["S1"]
    assert deeps[1]["sessions_shown"] == ["S2"] and "S1" in deeps[1]["skipped_masked_sessions"]
    assert sessions["S1"]["text"] not in prompt(calls_of(m, "DeepReply")[1])
    assert state["hymem_sessions_shown"] == ["S1", "S2"]


def test_b11_all_sessions_shown_skips_the_deep_answer_and_keeps_the_draft(data_dir: str) -> None:
    ctx = build_store(data_dir, TOPICS[:1])
    m = model(LightReply=LIGHT_NO, DeepReply=[{"answer": "Pixel", "supports": ["D1:1"]}],
              ReflectReply={"finished": 0, "new_question": "cat name again"})
    out, _ = run(ctx, m)
    assert len(calls_of(m, "DeepReply")) == 1
    assert "already shown" in records(out, "deep")[1]["why"]
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]


# --- 12. answer is deterministic ---------------------------------------------------------------------


def test_b12_answer_makes_no_call_and_supports_are_shown_links(ctx: AllMethodsContext) -> None:
    m = model(LightReply=[LIGHT_NO, LIGHT_OK], DeepReply={"answer": "first draft", "supports": []},
              ReflectReply={"finished": 0, "new_question": "Pixel cat name"})
    out, state = run(ctx, m, hymem_light_supports="all_shown")
    n_before = len(m.calls)
    assert records(out, "answer")[0]["calls"] == 0
    assert out["answer"] == state["draft_answer"] == "Pixel"
    shown_links = {t for r in out["trace"] for t in r.get("shown_turn_ids") or ()}
    assert out["supports"] and set(out["supports"]) <= shown_links
    assert set(out["shown_turn_ids"]) == shown_links  # the typed state key and the trace records agree
    last_light = records(out, "light")[-1]
    assert out["supports"] == last_light["shown_turn_ids"]
    assert [c["id"] for c in out["critical_memories"]] == out["supports"]
    assert len(m.calls) == n_before


# --- 13. call budget -----------------------------------------------------------------------------------


def test_b13_worst_case_is_seven_calls(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, ReflectReply={"finished": 0, "new_question": "Q2"})
    out, _ = run(ctx, m)
    assert len(m.calls) == 7
    assert [kind(c) for c in m.calls] == ["LightReply", "SelectReply", "DeepReply", "ReflectReply",
                                          "LightReply", "SelectReply", "DeepReply"]
    assert out["usage"]["calls"] == 7


# --- bad input -------------------------------------------------------------------------------------------


def test_malformed_deep_answer_uses_raw_text(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, DeepReply="Pixel, I think")
    out, _ = run(ctx, m)
    assert out["answer"] == "Pixel, I think"
    assert records(out, "deep")[0]["answer_from"] == "raw reply"


def test_empty_deep_reply_without_pool_says_no_information(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, DeepReply="")
    out, _ = run(ctx, m)
    assert out["answer"] == NO_INFO


def test_empty_store_gives_a_reason_and_no_crash(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default=per_turn_summaries))
    ingest_conversation(make_conversation(TOPICS), "ns", ctx, methods=[])  # turns only, no HyMem build
    m = model()
    out, _ = run(ctx, m)
    assert out["answer"] == NO_INFO and not m.calls
    assert "no HyMem summaries" in records(out, "light")[0]["why"]
    assert "no module produced an answer" in records(out, "answer")[0]["why"]


LIGHTS = st.sampled_from([LIGHT_OK, LIGHT_NO, {"finished": "0", "answer": ""}, "not json", {"finished": 7},
                          {"finished": 0, "answer": "No information available", "used": [1]}])
SELECTS = st.sampled_from([{"selected": [0, 2]}, {"selected": []}, {"selected": [3, 3, 99, "x"]}, "bad"])
DEEPS = st.sampled_from([DEEP_OK, {"answer": ""}, "free text answer", "", {"answer": "x", "supports": "D2:1"},
                         '{"answer": ""}', '{"supports": ["D2:1"]}'])
REFLECTS = st.sampled_from([SATISFIED, {"finished": 0, "new_question": "Q2"}, {"finished": 0}, "bad",
                            {"finished": 0, "new_question": "Q3"}])
# Every text a scripted reply offers as an answer; the final answer must be one of them (or NO_INFO).
WRITTEN_ANSWERS = {"Pixel", "x", "free text answer", NO_INFO}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(light=st.lists(LIGHTS, min_size=1, max_size=3), select=st.lists(SELECTS, min_size=1, max_size=3),
       deep=st.lists(DEEPS, min_size=1, max_size=3), reflect=st.lists(REFLECTS, min_size=1, max_size=2))
def test_b13_any_replies_stay_within_seven_calls_and_answer_with_written_text(
    ctx: AllMethodsContext, light: list[Any], select: list[Any], deep: list[Any], reflect: list[Any]
) -> None:
    m = model(LightReply=light, SelectReply=select, DeepReply=deep, ReflectReply=reflect)
    out, state = run(ctx, m)
    first_attempts = [c for c in m.calls if len(c["messages"]) == 1]  # a retry carries the failed reply
    assert len(first_attempts) <= 7
    assert out["answer"] in WRITTEN_ANSWERS  # never JSON, never empty
    assert records(out, "answer")[0]["why"]
    if out["answer"] == NO_INFO:
        assert out["supports"] == []
    else:
        assert out["supports"] and set(out["supports"]) <= set(open_workspace(ctx.data_dir).turns("ns"))


# --- light supports: the summaries the answer used ------------------------------------------------


def test_light_supports_are_the_turns_of_the_cited_summaries(ctx: AllMethodsContext) -> None:
    m = model(LightReply={"finished": 0, "answer": "Pixel", "used": [2, 99, 2]})
    out, state = run(ctx, m, hymem_light_k=4)
    summaries = load_summaries(open_workspace(ctx.data_dir), "ns")
    cited = state["hymem_light_ids"][2]
    assert out["supports"] == summaries[cited]["turn_ids"]
    assert records(out, "light")[0]["supports_from"] == "summaries the light call cited"
    assert "id: 2, time:" in prompt(calls_of(m, "LightReply")[0])


def test_light_supports_without_citation_are_the_summaries_sharing_the_answers_words(ctx: AllMethodsContext) -> None:
    m = model(LightReply={"finished": 0, "answer": "Berlin marathon", "used": [99]})
    out, state = run(ctx, m, hymem_light_k=50)
    summaries = load_summaries(open_workspace(ctx.data_dir), "ns")
    assert out["supports"] == [t for i in state["hymem_light_ids"] if "Berlin marathon" in summaries[i]["text"]
                               for t in summaries[i]["turn_ids"]]
    assert len(out["supports"]) < len(records(out, "light")[0]["shown_turn_ids"])


# --- an answer is text a model wrote as its answer -------------------------------------------------


@pytest.mark.parametrize("reply", ['{"answer": ""}', '{"supports": ["D1:1"]}', "", '{"answer": {"a": 1}}'])
def test_a_json_only_or_empty_deep_reply_is_never_the_answer(ctx: AllMethodsContext, reply: str) -> None:
    m = model(LightReply=LIGHT_NO, DeepReply=reply, ReflectReply={"finished": 1})
    out, _ = run(ctx, m)
    assert out["answer"] == NO_INFO
    assert records(out, "deep")[0]["answer_from"] == "no info"
    assert len(calls_of(m, "DeepReply")) == 2  # the validation error was shown once


@pytest.mark.parametrize("second", ['{"answer": ""}', {"answer": "No information available", "supports": []}])
def test_a_deep_reply_without_an_answer_keeps_the_earlier_answer(ctx: AllMethodsContext, second: Any) -> None:
    m = model(LightReply=LIGHT_NO, DeepReply=[{"answer": "Pixel", "supports": ["D1:1"]}, second],
              ReflectReply={"finished": 0, "new_question": "the cat's name again"})
    out, state = run(ctx, m)
    assert len(records(out, "deep")) == 2
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]
    assert records(out, "deep")[1]["answer_from"].startswith("memory pool")


@pytest.mark.parametrize("light", [{"finished": 0, "answer": "No information available."},
                                   {"finished": 0, "answer": '{"answer": ""}'}])
def test_light_no_information_is_insufficient(ctx: AllMethodsContext, light: dict[str, Any]) -> None:
    m = model(LightReply=light)
    out, _ = run(ctx, m)
    assert nodes(out["trace"])[:2] == ["light", "deep"]
    assert out["answer"] == "Pixel"


# --- turn ids of any shape ----------------------------------------------------------------------------


def test_custom_turn_ids_come_back_as_supports(data_dir: str) -> None:
    turns = tuple(Turn(id=i, speaker=spk, text=t, session=1, index=k, date_time="1 May, 2023")
                  for k, (i, spk, t) in enumerate([("ann-cat", "Ann", "I adopted a grey cat named Pixel"),
                                                   ("bob-q1", "Bob", "What does Pixel eat?")], start=1))
    conv = Conversation(id="custom", speakers=("Ann", "Bob"), sessions=(Session(1, "1 May, 2023", None, turns),))
    summariser = ScriptedChatModel(default={"items": [{"text": "Ann adopted a grey cat, Pixel", "turn_ids": ["ann-cat"]},
                                                      {"text": "Bob asked what Pixel eats", "turn_ids": ["[bob-q1]"]}]})
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=summariser)
    ingest_conversation(conv, "ns", ctx, methods=["hymem"])
    m = model(LightReply=LIGHT_NO, DeepReply={"answer": "Pixel", "supports": "[ann-cat], Bob-Q1, D1:1"})
    out, _ = run(ctx, m)
    assert out["supports"] == ["ann-cat", "bob-q1"]
    assert [c["id"] for c in out["critical_memories"]] == ["ann-cat", "bob-q1"]
    light = model(LightReply={"finished": 0, "answer": "Pixel", "used": [0]})
    out, state = run(ctx, light)
    summaries = load_summaries(open_workspace(data_dir), "ns")
    assert out["supports"] == summaries[state["hymem_light_ids"][0]]["turn_ids"]


def test_a_second_question_on_the_same_thread_starts_fresh(ctx: AllMethodsContext) -> None:
    m = model(LightReply=LIGHT_NO, ReflectReply={"finished": 0, "new_question": "rewritten"})
    ctx = ctx.with_overrides(hymem_light_turn_tokens=0, hymem_final_answer_tokens=0)
    g = graph.builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "same"}, "recursion_limit": 40}
    g.invoke({"namespace": "ns", "question": Q}, config, context=ctx.with_overrides(chat_model=m))
    n_calls = len(m.calls)
    g.invoke({"namespace": "ns", "question": "Where did Ann move?"}, config, context=ctx.with_overrides(chat_model=m))
    second = g.get_state(config).values
    lights = records(second, "light")
    assert lights[0]["query"] == "Where did Ann move?" and lights[0]["round"] == 0
    assert len(m.calls) - n_calls == 7  # two full rounds again, reflect included
    assert second["iteration"] == 1


# --- hymem_light_grounding: a light answer must be in the raw turns behind its summaries ------------


@pytest.mark.parametrize("answer", ["Whiskers", "Bob"])  # invented; only a speaker label, never in a turn's text
def test_an_ungrounded_light_answer_escalates_to_deep(ctx: AllMethodsContext, answer: str) -> None:
    m = model(LightReply={"finished": 0, "answer": answer, "used": list(range(50))})
    out, _ = run(ctx, m, hymem_light_k=50)
    light = records(out, "light")[0]
    assert nodes(out["trace"])[:2] == ["light", "deep"]
    assert light["ungrounded_answer"] == answer and light["decision"] == "deep"
    assert out["answer"] == "Pixel" and records(out, "answer")[0]["answered_by"] != "light"


def test_a_grounded_light_answer_is_kept_and_the_check_can_be_switched_off(ctx: AllMethodsContext) -> None:
    grounded, _ = run(ctx, model(LightReply={"finished": 0, "answer": "the Berlin marathon", "used": [99]}),
                      hymem_light_k=50)
    assert nodes(grounded["trace"]) == ["light", "reflect", "answer"]
    assert grounded["answer"] == "the Berlin marathon"

    spec, _ = run(ctx, model(LightReply={"finished": 0, "answer": "Whiskers", "used": [0]}),
                  hymem_light_grounding=False)
    assert nodes(spec["trace"]) == ["light", "reflect", "answer"] and spec["answer"] == "Whiskers"


def test_hybrid_rerank_lets_a_bm25_only_summary_into_the_light_call(data_dir: str) -> None:
    """hymem_rerank=hybrid: a summary sharing a rare word with the question but little else, which cosine
    ranks below the light call's k, is shown once BM25 is fused in; "none" (the spec) keeps cosine order."""
    # the filler shares only stopwords with the question (BM25 drops them), enough for a higher cosine
    filler = [("Ann", f"it is then {i}") for i in range(12)]
    ctx = build_store(data_dir, [filler + [("Bob", "zyzzyva")]])
    question = "is it then zyzzyva"
    rare = next(sid for sid, s in load_summaries(open_workspace(data_dir), "ns").items() if "zyzzyva" in s["text"])
    assert rare not in cosine_order(data_dir, question)[:2]
    _, dense = run(ctx, model(), question, hymem_light_k=2)
    _, hybrid = run(ctx, model(), question, hymem_light_k=2, hymem_rerank="hybrid")
    assert dense["hymem_light_ids"] == cosine_order(data_dir, question)[:2]
    assert rare in hybrid["hymem_light_ids"] and len(hybrid["hymem_light_ids"]) == 2


def test_turn_ranking_lets_a_unit_whose_turn_matches_into_the_light_call(data_dir: str) -> None:
    """hymem_turn_ranking (issue 35): summaries that do not repeat the asked-about words leave cosine to
    corpus order; taking units in turn from that order and from their best linked turn's, the unit linking
    the matching turn is shown second. False (the spec) keeps the summaries' cosine order."""
    turns = [("Ann", f"talk number {i} about weather") for i in range(1, 9)] + [("Bob", "I adopted a grey cat named Pixel")]

    def vague(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"items": [{"text": f"a chat, part {n}", "turn_ids": [i]}
                          for n, (i, _, _) in enumerate(LINE.findall(messages[-1].content), start=1)]}

    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default=vague), hymem_turns_per_summary=0)
    ingest_conversation(make_conversation([turns]), "ns", ctx, methods=["hymem"])
    question = "What is the grey cat named Pixel called?"
    summaries = load_summaries(open_workspace(data_dir), "ns")
    pixel = next(sid for sid, s in summaries.items() if s["turn_ids"] == ["D1:9"])
    assert pixel not in cosine_order(data_dir, question)[:3]
    _, spec = run(ctx, model(), question, hymem_light_k=3)
    _, fused = run(ctx, model(), question, hymem_light_k=3, hymem_turn_ranking=True)
    assert spec["hymem_light_ids"] == cosine_order(data_dir, question)[:3]
    assert fused["hymem_light_ids"] == [cosine_order(data_dir, question)[0], pixel, cosine_order(data_dir, question)[1]]
    assert AllMethodsContext(profile="paper").hymem_turn_ranking is False is AllMethodsContext().hymem_turn_ranking
