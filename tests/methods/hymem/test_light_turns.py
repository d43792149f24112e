"""The light call reads the best-ranked turns grouped by session (`hymem_light_turn_tokens`, issue 35).

The conversation's turns ranked by cosine and BM25 fused are taken while their lines and their sessions'
dated headers fit the setting's tokens, and shown in dialogue order; the call cites turn ids, its supports are
the cited turns it was shown; 0 is the spec (the top summaries only).
"""

from __future__ import annotations

import re

import pytest

from recollect.graphs.hymem.light_turns import SCAN, session_header
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.llm.usage import estimate_tokens
from recollect.memory.turn_ranking import ranked_turns
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation
from tests.methods.hymem.test_graph import TOPICS, Q, build_store, calls_of, model, prompt, records, run


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    return build_store(data_dir, TOPICS)


HEADER = re.compile(r"^Session S(\d+), (.+)$")
RAW = re.compile(r"^  \[(D(\d+):\d+)\] ")


def ranking(data_dir: str, query: str = Q) -> list[str]:
    ws = open_workspace(data_dir)
    return ranked_turns(ws, "ns", query, list(ws.turns("ns")), SCAN, "hybrid")


def order(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda t: tuple(int(x) for x in t[1:].split(":")))


def test_the_best_ranked_turns_are_shown_in_dialogue_order_under_one_dated_header_per_session(
        ctx: AllMethodsContext, data_dir: str) -> None:
    m = model()
    out, state = run(ctx, m, hymem_light_turn_tokens=4000)  # room for every turn
    ranked = ranking(data_dir)
    assert state["shown_turn_ids"] == order(ranked) == state["hymem_light_ids"]
    turns = open_workspace(data_dir).turns("ns")
    session, listed = None, []
    for line in state["evidence"]:
        if (head := HEADER.match(line)) is not None:
            session = int(head.group(1))
            assert line == session_header(session, turns[f"D{session}:1"].date_time)
            continue
        raw = RAW.match(line)
        assert raw is not None and int(raw.group(2)) == session, line
        turn = turns[raw.group(1)]
        assert line == f"  [{turn.id}] {turn.speaker}: {turn.full_text}"
        listed.append(turn.id)
    assert listed == state["shown_turn_ids"]
    assert len([line for line in state["evidence"] if HEADER.match(line)]) == len({t.split(":")[0] for t in listed})
    light_prompt = prompt(calls_of(m, "LightTurnsReply")[0])
    assert "\n".join(state["evidence"]) in light_prompt and Q in light_prompt
    assert light_prompt.startswith("You answer a question about a past conversation from lines of")
    assert records(out, "light")[0]["memory"] == "turns"


def test_turns_are_taken_in_rank_order_while_they_fit_and_the_best_always(ctx: AllMethodsContext,
                                                                           data_dir: str) -> None:
    ranked = ranking(data_dir)
    sizes = []
    for budget in (1, 40, 80, 4000):
        out, state = run(ctx, model(), hymem_light_turn_tokens=budget)
        shown = state["shown_turn_ids"]
        assert set(shown) == set(ranked[: len(shown)])  # a prefix of the ranking
        assert sum(estimate_tokens(line) for line in state["evidence"]) <= budget or len(shown) == 1
        assert state["retrieved_turn_ids"][: len(shown)] == ranked[: len(shown)]
        assert records(out, "light")[0]["not_shown_for_budget"] == state["retrieved_turn_ids"][len(shown):]
        sizes.append(len(shown))
    assert sizes[0] == 1 and sizes == sorted(sizes) and sizes[-1] == len(ranked) > sizes[1]


def test_supports_are_the_cited_turns_that_were_shown(ctx: AllMethodsContext, data_dir: str) -> None:
    cited = {"finished": 0, "answer": "Pixel", "used": ["D1:1", "D9:9", "[D1:3]"]}
    out, state = run(ctx, model(LightTurnsReply=cited), hymem_light_turn_tokens=4000)
    assert state["supports"] == ["D1:1", "D1:3"] and state["draft_answer"] == "Pixel"
    assert records(out, "light")[0]["supports_from"] == "turns the light call cited"
    # no citation: the shown turns sharing the most words with the answer
    _, state = run(ctx, model(LightTurnsReply={"finished": 0, "answer": "Pixel sleeps"}), hymem_light_turn_tokens=4000)
    assert state["supports"] == ["D1:3"]


def test_an_answer_found_in_no_turn_it_rests_on_escalates_to_deep(ctx: AllMethodsContext) -> None:
    m = model(LightTurnsReply={"finished": 0, "answer": "Whiskers", "used": ["D1:1"]})
    out, _ = run(ctx, m, hymem_light_turn_tokens=4000)
    light = records(out, "light")[0]
    assert light["decision"] == "deep" and light["ungrounded_answer"] == "Whiskers"
    assert calls_of(m, "DeepReply")


def test_insufficient_turns_go_to_deep_and_zero_is_the_spec(ctx: AllMethodsContext) -> None:
    m = model(LightTurnsReply={"finished": 2, "answer": ""})
    out, _ = run(ctx, m, hymem_light_turn_tokens=4000)
    assert records(out, "light")[0]["why"] == "light judged the turns insufficient (finished=2)"
    assert calls_of(m, "SelectReply") and calls_of(m, "DeepReply")
    m = model()
    _, state = run(ctx, m, Q, hymem_light_k=8, hymem_light_turn_tokens=0)
    assert all(line.startswith("id: ") for line in state["evidence"]) and not calls_of(m, "LightTurnsReply")
    assert prompt(calls_of(m, "LightReply")[0]).startswith(
        "You answer a question about a past conversation using memory summaries.")


def test_a_namespace_without_hymem_memory_still_says_so(data_dir: str) -> None:
    bare = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default={}))
    ingest_conversation(make_conversation(TOPICS), "ns", bare, methods=[])  # turns only, no HyMem build
    m = model()
    out, _ = run(bare, m, hymem_light_turn_tokens=4000)
    assert "no HyMem summaries" in records(out, "light")[0]["why"] and not m.calls




def test_the_turns_are_the_default(ctx: AllMethodsContext) -> None:
    m = model()
    _, state = run(ctx, m, hymem_light_turn_tokens=AllMethodsContext().hymem_light_turn_tokens)
    assert AllMethodsContext().hymem_light_turn_tokens == 1280
    assert calls_of(m, "LightTurnsReply") and not calls_of(m, "LightReply")
    assert AllMethodsContext(profile="paper").hymem_light_turn_tokens == 0
