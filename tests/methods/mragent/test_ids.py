"""MRAgent with turn ids of any shape: LoCoMo's `D3:12` reads as before, and a dialogue whose turns are
called `bob-q1` or `intro` ingests, navigates and cites the same way (README.md in this folder)."""

from __future__ import annotations

from typing import Any

import pytest

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.mragent.graph import graph
from recollect.graphs.mragent.layout import id_turn, shaped_like_id, turn_of, turn_shapes
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.supports import map_supports
from recollect.graphs.mragent.tools import ToolContext, execute
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.workspace import open_workspace
from tests.helpers import run_graph
from tests.methods.mragent.fakes import PAPER_LOOP, QuestionModel, ingest_model

LOCOMO = {"D1:1", "D1:2", "D1:12", "D3:12"}


@pytest.mark.parametrize(("ident", "expected"), [
    ("D3:12", "D3:12"), (" D3:12-2 ", "D3:12"), ("D1:12-1", "D1:12"), ("D9:9", None), ("D9:9-1", None),
    ("[D3:12]", None), ("d3:12", None), ("D3:12.", None), ("D3:t2", None), ("D3:12-x", None),
])
def test_turn_of_reads_known_turn_and_sentence_ids_exactly(ident: str, expected: str | None) -> None:
    assert turn_of(ident, LOCOMO) == expected


@pytest.mark.parametrize(("ident", "expected"), [
    ("D9:9", "D9:9"), ("D9:9-2", "D9:9"), (" D1:1 ", "D1:1"), ("D3:t2", None), ("d3:12", None), ("Maya", None),
    ("D3:12-2-1", None), ("3-1", None),
])
def test_an_id_shaped_like_the_dialogues_names_its_turn_even_when_unknown(ident: str, expected: str | None) -> None:
    shapes = turn_shapes(LOCOMO)
    assert id_turn(ident, shapes) == expected
    assert shaped_like_id(ident, shapes) is (expected is not None)


def test_other_id_shapes() -> None:
    turns = {"bob-q1", "bob-q2", "intro"}
    assert turn_of("bob-q1-2", turns) == "bob-q1" and turn_of("intro-1", turns) == "intro"
    assert turn_of("bob-q3", turns) is None and turn_of("bob", turns) is None
    assert id_turn("bob-q7-1", turn_shapes(turns)) == "bob-q7" and id_turn("ann-q1", turn_shapes(turns)) is None
    cited = ["[bob-q2-1] Bob said so", "intro: Ann: hello", "bob-q1x", "bob-q12"]
    assert map_supports(cited, ["bob-q2", "intro", "bob-q1", "bob-q2-1"], turns) == ["bob-q2", "intro"]


# --- a whole dialogue with its own ids

TURNS = [("intro", "Ann", "I adopted a grey cat named Pixel yesterday."),
         ("bob-q1", "Bob", "Where did you find Pixel?"),
         ("ann-a1", "Ann", "At the Riverside shelter near my flat."),
         ("bob-q2", "Bob", "Does Pixel like the balcony?"),
         ("outro", "Ann", "Pixel sleeps on the balcony all day.")]


def _conversation() -> Conversation:
    date = "10:00 am on 1 May, 2023"
    turns = tuple(Turn(id=tid, speaker=spk, text=text, session=1, index=k, date_time=date)
                  for k, (tid, spk, text) in enumerate(TURNS, start=1))
    return Conversation(id="conv-ids", speakers=("Ann", "Bob"), sessions=(Session(1, date, None, turns),))


@pytest.fixture
def own_ids(data_dir: str) -> AllMethodsContext:
    model = ingest_model()
    conv = _conversation()
    model.default.sessions = conv.sessions  # the compact prompt numbers the turns; the fake maps them back
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mra_ingest_cues="llm", **PAPER_LOOP)
    report = ingest_conversation(conv, "ns", ctx, methods=["mragent"])[-1]
    assert not [f for f in report.fallbacks if "unknown" in f]
    return ctx


def test_ingestion_and_tools_work_with_any_turn_ids(own_ids: AllMethodsContext, data_dir: str) -> None:
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    assert set(g.events) == {f"{tid}-1" for tid, _, _ in TURNS}
    assert g.origin_of("bob-q1-1") == "bob-q1" and g.origin_of("bob-q1-7") is None and g.origin_of("ann-a9") is None
    # neighbours by position in the session (these ids are not one prefix and a number, like LoCoMo's)
    assert g.adjacent("bob-q1", 1) == ["intro", "ann-a1"]
    assert g.adjacent("intro", 1) == ["bob-q1"] and g.adjacent("outro", 2) == ["ann-a1", "bob-q2"]
    t = ToolContext(graph=g, question="Where did Ann find Pixel?", cfg=own_ids)
    res = execute("query_event_context", {"event_id": "outro-1", "window": 1}, t)
    assert res.error is None and res.shown_turns == ["bob-q2"]
    assert "unknown event id 'bob-q9'" in execute("query_conversation_time", {"event_id": "bob-q9"}, t).text
    assert "'D1:1' is not an event id" in execute("query_conversation_time", {"event_id": "D1:1"}, t).text


def test_the_graph_keeps_and_cites_any_turn_ids(own_ids: AllMethodsContext) -> None:
    navigate: list[Any] = [
        {"mode": "navigate", "calls": [{"tool": "query_event_context", "args": {"event_id": "bob-q1", "window": 1}}],
         "keep": []},
        {"mode": "answer", "answer": "Riverside shelter", "supports": ["ann-a1-1", "nobody-1"], "confidence": 0.9,
         "keep": ["ann-a1"]},
    ]
    qm = QuestionModel(navigate=navigate)
    out, state = run_graph(graph, own_ids.with_overrides(chat_model=qm.model, mra_answer_rewrite=False), "ns",
                           "Where did Ann find Pixel?")
    assert out["supports"] == ["ann-a1"]
    assert "ann-a1" in [m["id"] for m in state["critical_memories"]]
    assert "ann-a1" in state["shown_turn_ids"]
