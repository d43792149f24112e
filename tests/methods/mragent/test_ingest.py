"""MRAgent ingestion: acceptance behaviours 1–3 (graphs/mragent/README.md) with a scripted model,
in every reply format (the format-specific checks are in test_compact.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from recollect.graphs.mragent.cues import cue_relation, cue_tokens, fallback_cues
from recollect.graphs.mragent.layout import EVENTS_KIND, K_EVENT, TOPICS_KIND
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.validation import normalise_time
from recollect.graphs.mragent.windows import windows
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.workspace import NamespaceError, open_workspace
from tests.helpers import make_conversation
from tests.methods.mragent.fakes import SESSIONS, ingest, ingest_model

EVENT_RE = re.compile(r"^D(\d+):(\d+)-(\d+)$")
# Every reply format (mra_ingest_format) must keep the ingestion guarantees; the fake model answers in
# the format the prompt asks for. compact_merged makes one call per window (the cues come with call A).
ALL_FORMATS = pytest.mark.parametrize("fmt", ["compact", "compact_merged", "json"])


def calls_per_window(fmt: str) -> int:
    return 1 if fmt == "compact_merged" else 2


@ALL_FORMATS
def test_two_calls_per_window_and_zero_on_reingest(data_dir: str, fmt: str) -> None:
    model = ingest_model()
    ctx, report = ingest(data_dir, model=model, mra_ingest_format=fmt)
    assert len(model.calls) == calls_per_window(fmt) * len(SESSIONS) == report.llm_calls
    ws = open_workspace(data_dir)
    n_events = ws.docs.count("ns", K_EVENT)
    n_vec = ws.index(EVENTS_KIND, "ns").count()
    _, again = ingest(data_dir, model=model, mra_ingest_format=fmt)
    assert len(model.calls) == calls_per_window(fmt) * len(SESSIONS)  # nothing new
    assert again.llm_calls == 0 and again.sessions == 0
    assert ws.docs.count("ns", K_EVENT) == n_events and ws.index(EVENTS_KIND, "ns").count() == n_vec


@ALL_FORMATS
def test_windows_split_a_long_session_and_each_window_costs_two_calls(data_dir: str, fmt: str) -> None:
    conv = make_conversation(SESSIONS, captions={"D1:1": "a grey cat on a sofa"})
    wins = windows(conv.sessions[0], 64)
    assert len(wins) > 1 and [t.id for w in wins for t in w] == [t.id for t in conv.sessions[0].turns]
    model = ingest_model()
    ingest(data_dir, model=model, mra_ingest_window_tokens=64, mra_ingest_format=fmt)
    n_windows = sum(len(windows(s, 64)) for s in conv.sessions)
    assert len(model.calls) == calls_per_window(fmt) * n_windows
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    # topic numbering continues across the windows of a session
    s1_topics = sorted(t for t in g.topics if t.startswith("D1:"))
    assert len(s1_topics) == len(set(s1_topics)) == len(windows(conv.sessions[0], 64))


@ALL_FORMATS
def test_every_turn_has_an_event_and_ids_are_well_formed(data_dir: str, fmt: str) -> None:
    # The model drops D1:3 and invents a turn D99:1: the first gets a fallback, the second is logged.
    model = ingest_model(drop={"D1:3"}, invent=True)
    _, report = ingest(data_dir, model=model, mra_ingest_format=fmt)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    turns = g.turns
    assert {ev["origin"] for ev in g.events.values()} == set(turns)
    for eid, ev in g.events.items():
        m = EVENT_RE.match(eid)
        assert m, eid
        assert ev["origin"] == eid.rsplit("-", 1)[0] and ev["origin"] in turns
        assert ev["session"] == int(m[1])
    fallback = g.events["D1:3-1"]
    assert fallback["tag"] == "Other" and fallback["rewritten"] == turns["D1:3"].full_text
    assert any("D99:1" in f for f in report.fallbacks)
    assert any("D1:3" in f for f in report.fallbacks)
    # content is the raw turn text with the caption; the rewrite is kept separately
    assert g.events["D1:1-1"]["content"] == "I adopted a grey cat named Pixel yesterday. [shared image: a grey cat on a sofa]"
    assert g.events["D1:1-1"]["rewritten"].startswith("Ann said:")


@pytest.mark.parametrize("fmt", ["compact", "json"])  # compact_merged makes no cue call here
def test_invented_cue_ids_are_dropped_and_logged(data_dir: str, fmt: str) -> None:
    _, report = ingest(data_dir, model=ingest_model(invent_id=True), mra_ingest_format=fmt)
    assert any("D42:1-1" in f for f in report.fallbacks)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    assert "ghost" not in {c["cue"] for c in g.cues.values()}


@ALL_FORMATS
def test_cues_are_verbatim_and_speaker_is_always_a_cue(data_dir: str, fmt: str) -> None:
    _, report = ingest(data_dir, mra_ingest_format=fmt)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    for ev in g.events.values():
        low = ev["rewritten"].lower()
        assert ev["speaker"] in ev["cues"]
        for cue in ev["cues"]:
            assert cue == ev["speaker"] or cue.lower() in low
        assert "unicorn" not in [c.lower() for c in ev["cues"]]
        assert len(ev["cues"]) <= 31
    assert any("not found verbatim" in f for f in report.fallbacks)
    # cue index: cue -> tag -> events
    pixel = g.cues["pixel"]
    assert "D1:1-1" in [e for ids in pixel["tags"].values() for e in ids]


@ALL_FORMATS
def test_malformed_replies_fall_back(data_dir: str, fmt: str) -> None:
    model = ScriptedChatModel(default="this is not json at all")
    _, report = ingest(data_dir, model=model, mra_ingest_format=fmt)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    assert len(g.events) == sum(len(s) for s in SESSIONS)  # one raw sentence per turn
    assert all(ev["tag"] == "Other" and ev["topics"] == [] for ev in g.events.values())
    assert g.persona == {}
    ev = g.events["D1:4-1"]
    assert ev["cues"][:-1] == fallback_cues(ev["rewritten"]) and ev["cues"][-1] == "Bob"
    assert any("rewrite failed" in f for f in report.fallbacks)
    assert any("cue extraction failed" in f for f in report.fallbacks)
    # a session built while a call failed is not stamped as done, and a failed reply is not cached: the
    # next ingest (with a working model, say) asks the model again instead of keeping the fallback memory
    n = len(model.calls)
    ingest(data_dir, model=model, mra_ingest_format=fmt)
    assert len(model.calls) == 2 * n


def test_incremental_sessions_extend_the_graph(data_dir: str) -> None:
    model = ingest_model()
    ingest(data_dir, sessions=SESSIONS[:1], model=model)
    assert len(model.calls) == 2
    g1 = CueTagGraph.load(open_workspace(data_dir), "ns")
    _, report = ingest(data_dir, sessions=SESSIONS, model=model)
    assert len(model.calls) == 4 and report.sessions == 1
    g2 = CueTagGraph.load(open_workspace(data_dir), "ns")
    assert set(g1.events) < set(g2.events)
    assert open_workspace(data_dir).index(TOPICS_KIND, "ns").count() == len(g2.topics)
    assert "Ann" in g2.persona and "Bob" in g2.persona


@ALL_FORMATS
def test_times_tags_topics_and_timeline(data_dir: str, fmt: str) -> None:
    model = ingest_model(time_for=lambda tid: "2023-05-10" if tid == "D1:1" else "not a date",
                         tag_for=lambda tid, text: "")
    ingest(data_dir, model=model, mra_ingest_format=fmt)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    assert g.events["D1:1-1"]["time"] == "2023-05-10"
    assert g.events["D1:2-1"]["time"] == "2023-05-01"  # unparsable time → the session date
    assert g.events["D1:2-1"]["tag"] == "Other"
    assert g.timeline["2023-05-10"] == ["D1:1-1"]
    assert all(t in g.topics for ev in g.events.values() for t in ev["topics"])  # t9 (empty) dropped
    assert normalise_time("2023-05-01 to 2023-05-05", "2023-01-01") == "2023-05-03"


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("grey cat", "Grey Cat", "equal"),
        ("cat", "grey cat", "contain"),
        ("alpha beta gamma delta", "alpha beta gamma epsilon", "jaccard"),  # 3/5 = 0.6
        ("alpha beta gamma", "alpha beta delta", None),  # 2/4 = 0.5
    ],
)
def test_relation_matching_fixtures(a: str, b: str, expected: str | None) -> None:
    assert cue_relation(cue_tokens(a), cue_tokens(b), 0.6) == expected


def test_full_and_partial_matches_are_separated(data_dir: str) -> None:
    ingest(data_dir)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    full, partial = g.match_question(
        [{"cue": "Pixel", "alternatives": []}, {"cue": "balcony", "alternatives": ["balconies"]}], 0.6
    )
    assert full == ["D2:4-1"]  # "Pixel sleeps on the balcony"
    assert partial.get("D1:1-1") == 1 and partial.get("D2:2-1") == 1
    assert "D2:4-1" not in partial


def test_namespace_without_graph_is_a_clear_error(data_dir: str) -> None:
    from recollect.graphs.registry import AllMethodsContext
    from recollect.ingestion import ingest_conversation

    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ingest_model())
    ingest_conversation(make_conversation(SESSIONS), "other", ctx, methods=[])
    with pytest.raises(NamespaceError, match="no MRAgent graph"):
        CueTagGraph.load(open_workspace(data_dir), "other")
    with pytest.raises(NamespaceError, match="never been ingested"):
        CueTagGraph.load(open_workspace(data_dir), "missing")


def test_cues_under_a_turn_id_go_to_that_turns_sentences() -> None:
    from recollect.graphs.mragent.formats import CueReply
    from recollect.graphs.mragent.validation import apply_cues

    def event(origin: str, text: str) -> dict[str, Any]:
        return {"origin": origin, "speaker": "Ann", "rewritten": text, "cues": []}

    events = {"D1:3-1": event("D1:3", "Ann planted tomatoes."), "D1:3-2": event("D1:3", "Ann planted basil."),
              "D1:4-1": event("D1:4", "Ann bought a violin.")}
    reply = CueReply.model_validate({"sentences": [
        {"id": "D1:3", "cues": ["tomatoes", "basil", "unicorn"]},  # a turn id, not a sentence id
        {"id": "D9:9", "cues": ["violin"]},  # neither: dropped
    ]})
    notes = apply_cues(reply, events)
    assert events["D1:3-1"]["cues"] == ["tomatoes", "Ann"] and events["D1:3-2"]["cues"] == ["basil", "Ann"]
    assert any("fallback tokens for 1 sentence" in n for n in notes)  # D1:4-1 got its own tokens
    assert any("named a turn" in n for n in notes) and any("D9:9" in n for n in notes)
    assert any("discarded 1 cue" in n for n in notes)  # "unicorn" fits neither sentence
    # the spec's strict reading (mra_cues_accept_turn_ids=False): a turn id is unknown and dropped
    for ev in events.values():
        ev["cues"] = []
    notes = apply_cues(reply, events, accept_turn_ids=False)
    assert events["D1:3-1"]["cues"] == ["Ann", "planted", "tomatoes"]  # token fallback (speaker first)
    assert any("'D1:3'" in n for n in notes)
