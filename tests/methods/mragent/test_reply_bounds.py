"""Bounds on what the 1.5B model writes at question time: a navigate reply cut at its token cap keeps its
complete calls, and the final answer's and the cues' grammars bound their lengths."""

from __future__ import annotations

from recollect.graphs.mragent.protocol import NAVIGATE_MAX_TOKENS, parse_reply
from recollect.graphs.mragent.schemas import (
    CUE_ALTERNATIVES,
    BoundedFinalReply,
    BoundedQuestionCuesReply,
    FinalReply,
)

RUN_ON = ('```json\n{\n  "mode": "navigate",\n  "calls": [\n    {"tool": "query_event_keywords", "args": {"event_id": "D1:3"}},\n'
          '    {"tool": "query_tag_events", "args": {"tag": "garden"}}\n  ],\n  "keep": ["D1:3-1", "D1:3-2", "D1:3-3", "D1:3-')


def test_a_reply_cut_at_its_cap_keeps_its_complete_calls() -> None:
    out = parse_reply({"content": RUN_ON, "tool_calls": []})
    assert out["form"] == "json_navigate"
    assert out["calls"] == [{"tool": "query_event_keywords", "args": {"event_id": "D1:3"}},
                            {"tool": "query_tag_events", "args": {"tag": "garden"}}]
    assert out["keep"][:3] == ["D1:3-1", "D1:3-2", "D1:3-3"]  # the cut id is dropped later: it names no memory


def test_a_reply_cut_inside_its_first_call_runs_nothing() -> None:
    out = parse_reply({"content": '{"mode": "navigate", "calls": [{"tool": "query_event_ke', "tool_calls": []})
    assert out["calls"] == [] and out["form"] is None  # a call cut short is never run
    two = '{"mode": "navigate", "calls": [{"tool": "query_tag_events", "args": {"tag": "x"}}, {"tool": "query_ev'
    assert parse_reply({"content": two, "tool_calls": []})["calls"] == [{"tool": "query_tag_events", "args": {"tag": "x"}}]
    closed = parse_reply({"content": '{"mode": "navigate", "calls": [{"tool": "query_tag_events", "args": {"tag": "x"}}]}',
                          "tool_calls": []})
    assert closed["calls"] == [{"tool": "query_tag_events", "args": {"tag": "x"}}]  # a closed reply as before
    assert 250 <= NAVIGATE_MAX_TOKENS < 500


def test_the_grammars_bound_the_final_answer_and_the_cues() -> None:
    final = BoundedFinalReply.model_json_schema()["properties"]
    assert final["answer"]["maxLength"] == 200 and final["supports"]["maxItems"] == 10
    cue = BoundedQuestionCuesReply.model_json_schema()["$defs"]["BoundedQuestionCue"]["properties"]
    assert cue["alternatives"]["maxItems"] == CUE_ALTERNATIVES and cue["cue"]["maxLength"] == 40
    # validation stays lenient: a reply over a bound (an endpoint without grammars) is still read
    assert BoundedFinalReply.model_validate({"answer": "x" * 300, "supports": [str(i) for i in range(20)]}).answer
    assert "maxLength" not in FinalReply.model_json_schema()["properties"]["answer"]  # mra_reply_bounds off: the spec
