"""MRAgent tools: masking, caps, ranking, bad input (acceptance behaviours 9–11, graphs/mragent/README.md)."""

from __future__ import annotations

from typing import Any

import pytest

from recollect.graphs.mragent.cues import cue_norm
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.tools import REGISTRY, ToolContext, execute, structured_tools
from recollect.graphs.registry import AllMethodsContext
from recollect.memory.workspace import open_workspace
from tests.methods.mragent.fakes import ingest, ingest_model

PAPER_NAMES = {
    "query_tag_events", "query_conversation_time", "query_event_keywords", "query_event_context",
    "query_personal_information", "query_personal_aspect", "query_topic_events",
}


@pytest.fixture
def graph(data_dir: str) -> CueTagGraph:
    ingest(data_dir)
    return CueTagGraph.load(open_workspace(data_dir), "ns")


def tc(graph: CueTagGraph, **kw: Any) -> ToolContext:
    return ToolContext(graph=graph, question=kw.pop("question", "Where did Ann find Pixel?"), cfg=AllMethodsContext(), **kw)


def test_registry_names_follow_the_paper() -> None:
    assert set(REGISTRY) == PAPER_NAMES


def test_structured_tools_share_the_registry(graph: CueTagGraph, data_dir: str) -> None:
    tools = structured_tools(AllMethodsContext(data_dir=data_dir), "ns", "Where did Ann find Pixel?")
    assert {t.name for t in tools} == PAPER_NAMES
    ctx_tool = next(t for t in tools if t.name == "query_event_context")
    assert "D1:3: Ann: At the Riverside shelter" in ctx_tool.invoke({"event_id": "D1:2", "window": 1})


def test_masking_rule_and_already_shown(graph: CueTagGraph) -> None:
    t = tc(graph, masks={"D1:1"})
    before = set(t.masks)
    res = execute("query_event_context", {"event_id": "D1:2", "window": 1}, t)
    assert res.error is None
    assert res.already_shown == ["D1:1"] and res.shown_turns == ["D1:3"]
    for tid in before:
        assert graph.turns[tid].text not in res.text
    assert "already_shown: D1:1" in res.text
    # shown turns join the masks: the same call again shows nothing new
    again = execute("query_event_context", {"event_id": "D1:2", "window": 1}, t)
    assert again.shown_turns == [] and set(again.already_shown) == {"D1:1", "D1:3"}
    tag = execute("query_tag_events", {"cue": "Pixel", "tag": graph.events["D1:1-1"]["tag"]}, t)
    assert graph.turns["D1:1"].text not in tag.text and "D1:1" in tag.already_shown


def test_event_keywords_never_return_seen_cues(graph: CueTagGraph) -> None:
    t = tc(graph, seen_cues={cue_norm("Pixel"), cue_norm("adopted")})
    res = execute("query_event_keywords", {"event_id": "D1:1-1"}, t)
    assert res.error is None and res.cues
    assert cue_norm("Pixel") not in res.cues and cue_norm("adopted") not in res.cues
    assert "Pixel ->" not in res.text and "adopted ->" not in res.text
    # returned cues are now seen: a second call returns none of them
    res2 = execute("query_event_keywords", {"event_id": "D1:1"}, t)
    assert not set(res2.cues) & set(res.cues)


def test_other_tools(graph: CueTagGraph) -> None:
    t = tc(graph)
    time = execute("query_conversation_time", {"event_id": "D1:3-1"}, t)
    assert "10:00 am on 1 May, 2023" in time.text and "2023-05-01" in time.text
    info = execute("query_personal_information", {"person": "ann"}, t)
    assert "pets" in info.text
    facts = execute("query_personal_aspect", {"person": "ANN", "aspect": "Pets"}, t)
    assert "D1:1: Ann has a cat named Pixel" in facts.text and facts.visible_ids == ["D1:1"]
    topic = next(iter(graph.topics))
    top = execute("query_topic_events", {"topic": topic}, t)
    assert top.error is None and graph.topics[topic]["text"] in top.text


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("query_everything", {}, "unknown tool"),
        ("query_event_context", {"event": "D1:2", "window": 99}, "bad arguments"),
        ("query_event_context", {"wrong": 1}, "bad arguments"),
        ("query_event_context", "D1:2", "must be a JSON object"),
        ("query_event_keywords", {"event_id": "D9:99"}, "unknown event id 'D9:99'"),
        ("query_event_keywords", {"event_id": "D1:1-7"}, "unknown event id"),
        ("query_conversation_time", {"event_id": "pixel"}, "not an event id"),
        ("query_topic_events", {"topic": "D9:t9"}, "unknown topic id"),
        ("query_personal_information", {"person": "Zed"}, "known people: Ann, Bob"),
        ("query_personal_aspect", {"person": "Ann", "aspect": "cars"}, "no aspect 'cars'"),
        ("query_tag_events", {"cue": "zeppelin", "tag": "x"}, "not in the memory graph"),
        ("query_tag_events", {"cue": "Pixel", "tag": "nonexistent"}, "has no tag"),
    ],
)
def test_bad_calls_give_clear_errors(graph: CueTagGraph, tool: str, args: Any, message: str) -> None:
    res = execute(tool, args, tc(graph))
    assert res.error and message in res.error and res.text.startswith("error:")


def _many(data_dir: str, n: int = 25) -> CueTagGraph:
    sessions = [[("Ann" if i % 2 else "Bob", f"garden tomato note number{i} about plants") for i in range(1, n + 1)]]
    ingest(data_dir, sessions=sessions, model=ingest_model(tag_for=lambda tid, text: "garden"))
    return CueTagGraph.load(open_workspace(data_dir), "ns")


def test_tag_and_topic_events_are_capped_and_ranked(data_dir: str) -> None:
    g = _many(data_dir)
    question = "number17 plants"
    for tool, args in (("query_tag_events", {"cue": "garden", "tag": "garden"}),
                       ("query_topic_events", {"topic": "D1:t1"})):
        t = tc(g, question=question)
        res = execute(tool, args, t)
        assert len(res.shown_turns) == 20
        ranked = [g.events[e]["origin"] for e in g.rank_events(list(g.events), question)]
        assert res.shown_turns == ranked[:20]
        assert res.shown_turns[0] == "D1:17"


def test_a_second_cue_given_as_the_tag_lists_events_with_both_cues(graph: CueTagGraph) -> None:
    # Pick two cues that share an event, the second not being a tag of the first.
    first, second, shared = None, None, None
    for a in graph.cues:
        for b in graph.cues:
            common = set(graph.cue_events(a)) & set(graph.cue_events(b))
            if a != b and common and graph.tag_of(a, b) is None:
                first, second, shared = a, b, common
                break
        if first:
            break
    assert first and second
    res = execute("query_tag_events", {"cue": first.replace("_", " "), "tag": second.replace("_", " ")}, tc(graph))
    assert res.error is None and "events with both cues" in res.text
    assert {graph.events[e]["origin"] for e in shared} & set(res.shown_turns + res.already_shown)
