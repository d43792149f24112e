"""MRAgent's sentence source (`mra_ingest_sentences`, issue 34): with "turn" (the default) call A writes a
row per turn (tag, topics) and the dates of the turns that speak of a day, and each turn is one event whose
sentence is "<speaker>: <text>"; with "llm" (the spec, the paper profile) call A writes the sentences and sends
the requests it sent before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.mragent_ingest_tokens import digests, record
from recollect.eval.fingerprint import builder_fingerprint
from recollect.graphs.mragent.cues import MAX_CUES, fallback_cues
from recollect.graphs.mragent.formats import (
    TURN_FACT_CHARS,
    TurnRewriteReply,
    turn_facts_cap,
    turn_rewrite_reply,
    turn_rewrite_schema,
    turn_times_cap,
)
from recollect.graphs.mragent.layout import EVENTS_KIND, K_EVENT
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.validation import empty_rewrite, turn_sentence, validate_rewrite
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation
from tests.methods.mragent.fakes import SESSIONS, TURN_PROMPT, ingest, ingest_model

BEFORE = json.loads((Path(__file__).parents[1] / "data" / "mragent_ingest_requests_before.json").read_text())
CAPTION = "a grey cat on a sofa"  # the caption `fakes.ingest` gives D1:1


def turn_ingest(data_dir: str, **kw: Any) -> tuple[AllMethodsContext, Any]:
    """`fakes.ingest` with the defaults this file is about: the turns as sentences, lexical cues; the model's
    own tags and dates (`mra_turn_labels="llm"`), unless a test asks for the derived ones."""
    kw.setdefault("mra_ingest_sentences", "turn")
    kw.setdefault("mra_ingest_cues", "lexical")
    kw.setdefault("mra_turn_labels", "llm")
    return ingest(data_dir, **kw)


def graph(data_dir: str) -> CueTagGraph:
    return CueTagGraph.load(open_workspace(data_dir), "ns")


def test_the_defaults_and_the_paper_profile() -> None:
    assert AllMethodsContext().mra_ingest_sentences == "turn"
    assert AllMethodsContext(profile="paper").mra_ingest_sentences == "llm"


def test_each_turn_is_one_event_whose_sentence_is_the_speaker_and_the_turn(data_dir: str) -> None:
    model = ingest_model(time_for=lambda tid: "2023-04-30" if tid == "D1:1" else "",
                         tag_for=lambda tid, text: "adoption" if tid == "D1:1" else "chat")
    _, report = turn_ingest(data_dir, model=model)
    assert report.llm_calls == len(model.calls) == len(SESSIONS) and not report.fallbacks  # call A only
    call = model.calls[0]
    assert str(call["messages"][0].content).startswith(TURN_PROMPT)
    n_first = len(SESSIONS[0])
    assert call["kwargs"]["response_format"]["schema"] == turn_rewrite_schema(1, n_first)
    g = graph(data_dir)
    assert list(g.events) == [f"{t.id}-1" for t in g.turns.values()]  # one event per turn, the usual ids
    first = g.events["D1:1-1"]
    assert first["rewritten"] == f"Ann: I adopted a grey cat named Pixel yesterday. [shared image: {CAPTION}]"
    assert first["content"] == g.turns["D1:1"].full_text  # what the agent is shown is unchanged
    assert (first["tag"], first["time"], first["topics"]) == ("adoption", "2023-04-30", ["D1:t1"])
    assert g.events["D1:2-1"]["time"] == "2023-05-01"  # "" = the session date
    assert g.events["D2:1-1"]["rewritten"] == "Bob: I ran the Berlin marathon in four hours."
    assert g.timeline["2023-04-30"] == ["D1:1-1"]
    assert g.topics["D1:t1"]["text"] == "daily life" and "D1:1-1" in g.topics["D1:t1"]["events"]
    assert g.persona["Ann"]["pets"] == [{"origin": "D1:1", "fact": "Ann has a cat named Pixel"}]
    # the lexical cues come from the turn sentence, the speaker's name first among them
    assert first["cues"] == fallback_cues(first["rewritten"], MAX_CUES)
    assert "D1:1-1" in [e for ids in g.cues["pixel"]["tags"].values() for e in ids]
    ws = open_workspace(data_dir)
    assert ws.index(EVENTS_KIND, "ns").count() == ws.docs.count("ns", K_EVENT) == len(g.turns)


def test_unknown_numbers_are_dropped_missing_turns_get_a_fallback_and_repeats_are_dropped(data_dir: str) -> None:
    conv = make_conversation([SESSIONS[0][:3]])
    window = list(conv.sessions[0].turns)
    numbers = {str(t.index): t.id for t in window}
    reply = TurnRewriteReply.model_validate({
        "topics": ["pets", "music"],
        "turns": [[1, "adoption", [1], "2023-04-30"], [1, "again", [2], ""], [9, "ghost", [1], ""],
                  ["D7:1", "ghost", [], ""], [2, "shelter", [1, 2], "later"]],
        "facts": [[1, "Ann", "pets", "Ann has a cat"], [42, "Ann", "pets", "Ann has a ghost"]]})
    res = validate_rewrite(reply, window, "2023-05-01", 1, 1, numbers, from_turns=True)
    assert list(res.events) == ["D1:1-1", "D1:2-1", "D1:3-1"]  # every turn, one event each
    assert [ev["rewritten"] for ev in res.events.values()] == [turn_sentence(t) for t in window]
    assert [ev["tag"] for ev in res.events.values()] == ["adoption", "shelter", "Other"]
    assert [ev["time"] for ev in res.events.values()] == ["2023-04-30", "2023-05-01", "2023-05-01"]
    assert [ev["topics"] for ev in res.events.values()] == [["D1:t1"], ["D1:t1", "D1:t2"], []]
    assert res.facts == [{"person": "Ann", "aspect": "pets", "fact": "Ann has a cat", "origin": "D1:1"}]
    notes = " | ".join(res.notes)
    assert "dropped rows with unknown origin ['9', 'D7:1']" in notes
    assert "dropped 1 more row(s) for a turn that already had one" in notes
    assert "1 turn(s) without a row got a fallback: ['D1:3']" in notes
    assert "'42'" in notes


def test_a_model_that_writes_sentences_anyway_still_gives_its_tags() -> None:
    conv = make_conversation([SESSIONS[0][:2]])
    window = list(conv.sessions[0].turns)
    reply = TurnRewriteReply.model_validate({"topics": ["pets"], "sentences": [
        [1, "Ann adopted a cat named Pixel.", "adoption", [1], ""], [2, "shelter", [1], ""]], "facts": []})
    res = validate_rewrite(reply, window, "2023-05-01", 1, 1, {"1": "D1:1", "2": "D1:2"}, from_turns=True)
    assert [ev["tag"] for ev in res.events.values()] == ["adoption", "shelter"]
    assert res.events["D1:1-1"]["rewritten"] == "Ann: I adopted a grey cat named Pixel yesterday."


def test_a_reply_that_names_no_turn_is_no_reply() -> None:
    window = list(make_conversation([SESSIONS[0][:2]]).sessions[0].turns)
    numbers = {"1": "D1:1", "2": "D1:2"}
    rows = TurnRewriteReply.model_validate({"topics": [], "turns": [[9, "x", [], ""]], "facts": []})
    assert "no row names a turn" in (empty_rewrite(rows, window, numbers, from_turns=True) or "")
    good = TurnRewriteReply.model_validate({"topics": [], "turns": [[2, "", [], ""]], "facts": []})
    assert empty_rewrite(good, window, numbers, from_turns=True) is None  # a row without a tag still names its turn


@pytest.mark.parametrize("junk", ["this is not json at all", '{"topics": [], "turns": [], "facts": []}',
                                  '{"topics": [], "turns": [[99, "chat", [], ""]], "facts": []}'],
                         ids=["unparsable", "empty", "no-turn-named"])
def test_a_bad_reply_falls_back_and_is_asked_again(data_dir: str, junk: str) -> None:
    model = ScriptedChatModel(default=junk)
    _, report = turn_ingest(data_dir, model=model)
    g = graph(data_dir)
    assert len(g.events) == sum(len(s) for s in SESSIONS)
    assert all(ev["tag"] == "Other" and ev["topics"] == [] for ev in g.events.values())
    assert g.events["D1:4-1"]["rewritten"] == "Bob: I started violin lessons with Rosa last week."
    assert g.persona == {}
    assert any("rewrite failed" in f for f in report.fallbacks)
    n = len(model.calls)
    turn_ingest(data_dir, model=model)  # a fallback session is built again, its failed call asked again
    assert len(model.calls) == 2 * n


def test_reingest_reads_the_cache_and_the_modes_never_share_a_reply(data_dir: str) -> None:
    model = ingest_model()
    _, first = turn_ingest(data_dir, model=model)
    _, again = turn_ingest(data_dir, model=model)
    assert (first.llm_calls, again.llm_calls, again.sessions) == (len(SESSIONS), 0, 0)
    turn_events = graph(data_dir).events

    _, llm = turn_ingest(data_dir, model=model, mra_ingest_sentences="llm")  # its own calls: the rewrite
    assert (llm.llm_calls, llm.cached_calls, llm.sessions) == (len(SESSIONS), 0, len(SESSIONS))
    assert graph(data_dir).events["D1:1-1"]["rewritten"].startswith("Ann said:")
    _, back = turn_ingest(data_dir, model=model)  # rebuilt from the cached rows, no call
    assert (back.llm_calls, back.cached_calls, back.sessions) == (0, len(SESSIONS), len(SESSIONS))
    assert graph(data_dir).events == turn_events
    assert len(model.calls) == 2 * len(SESSIONS)


def test_the_llm_cue_call_reads_the_turn_sentences(data_dir: str) -> None:
    model = ingest_model()
    _, report = turn_ingest(data_dir, model=model, mra_ingest_cues="llm")
    assert report.llm_calls == 2 * len(SESSIONS)
    assert "1 | Ann: I adopted a grey cat" in str(model.calls[1]["messages"][0].content)
    ev = graph(data_dir).events["D1:3-1"]
    assert ev["cues"] == ["Riverside", "shelter", "near", "flat", "Ann"]  # verbatim words; "unicorn" discarded


@pytest.mark.parametrize("label", sorted(BEFORE["runs"]))
def test_the_llm_sentences_and_the_other_formats_send_the_requests_of_before(tmp_path: Path, label: str) -> None:
    """Every ingestion request (call A and B, messages, schema, caps) of the sample dialogue, as the commit
    before the setting sent it: "llm", and json / compact_merged whatever the setting (they ignore it); the
    model's own tags and dates (`mra_turn_labels="llm"`) as the commit before that setting (`commit_of`)."""
    from benchmarks.mragent_ingest_tokens import RUNS

    assert digests(record(RUNS[label], str(tmp_path))) == BEFORE["runs"][label]


def test_the_memory_fingerprint_follows_the_setting() -> None:
    ctx = AllMethodsContext()
    fp = builder_fingerprint("mragent", ctx)
    assert builder_fingerprint("mragent", ctx.with_overrides(mra_ingest_sentences="llm")).digest != fp.digest


def test_the_turn_sentences_change_the_requests(tmp_path: Path) -> None:
    """The digests above would notice a change: the default (the turns as sentences) sends other requests."""
    assert digests(record({}, str(tmp_path))) != BEFORE["runs"]["compact, sentences llm, cues lexical"]


def test_a_rebuilt_fallback_session_updates_the_event_metadata_without_embedding_again(data_dir: str) -> None:
    """A fallback event has the same sentence as the event that replaces it (the turn), so the rebuild embeds
    nothing again, and the vector index still takes the new tag and date."""
    turn_ingest(data_dir, model=ScriptedChatModel(default="not json"))
    _, report = turn_ingest(data_dir, model=ingest_model(time_for=lambda tid: "2023-04-30"))
    assert report.embedded == len(SESSIONS) and not report.fallbacks  # the sessions' topics, no event
    unit = open_workspace(data_dir).index(EVENTS_KIND, "ns").get(["D1:3-1"])[0]
    assert (unit.metadata["tag"], unit.metadata["time"]) == ("shelter", "2023-04-30")
    assert unit.text == graph(data_dir).events["D1:3-1"]["rewritten"]


def test_the_turn_rows_schema_is_bounded_by_its_window() -> None:
    """A grammar made from it writes exactly one row per turn of the window, names only the window's turns
    and keeps dates and facts few and short: unbounded, the model's replies ran on to max_tokens (issue 34)."""
    schema = turn_rewrite_schema(21, 32)
    props = schema["properties"]
    assert schema["required"] == ["topics", "turns", "times", "facts"]
    assert props["turns"]["minItems"] == props["turns"]["maxItems"] == 12
    assert [item["type"] for item in props["turns"]["items"]["prefixItems"]] == ["string", "array"]  # no number, no date
    number = props["times"]["items"]["prefixItems"][0]
    assert (number["minimum"], number["maximum"]) == (21, 32)
    assert props["times"]["maxItems"] == turn_times_cap(12) == 3
    assert props["facts"]["maxItems"] == turn_facts_cap(12) == 3
    assert props["facts"]["items"]["prefixItems"][0] == number
    assert props["facts"]["items"]["prefixItems"][3]["maxLength"] == TURN_FACT_CHARS
    assert turn_facts_cap(1) == 1 and turn_facts_cap(5) == 1 and turn_facts_cap(6) == 2
    assert turn_times_cap(1) == 1 and turn_times_cap(4) == 1 and turn_times_cap(5) == 2
    model = turn_rewrite_reply(21, 32)
    assert model.model_json_schema() == schema and turn_rewrite_reply(21, 32) is model
    assert issubclass(model, TurnRewriteReply) and model.first_turn == 21
    reply = model.model_validate({"topics": ["pets"], "turns": [["cat", [1]], ["vet", []]], "times": [], "facts": []})
    assert [(s.origin, s.tag) for s in reply.sentences] == [("21", "cat"), ("22", "vet")]


def test_a_row_is_its_turn_by_place_and_the_times_rows_date_the_turns() -> None:
    """Rows carry no turn number or date: the n-th row is the window's n-th turn; a `times` row dates its
    turn (its first row wins), one naming no turn of the window is dropped with a note; a turn without one
    takes the session date."""
    conv = make_conversation([SESSIONS[0][:3]])
    window = list(conv.sessions[0].turns)
    numbers = {str(t.index): t.id for t in window}
    reply = turn_rewrite_reply(1, 3).model_validate({
        "topics": ["pets", "music"], "turns": [["adoption", [1]], ["shelter", [1, 2]], ["flat", []]],
        "times": [[2, "2023-04-20"], [2, "2023-01-01"], [7, "2023-02-02"]], "facts": []})
    res = validate_rewrite(reply, window, "2023-05-01", 1, 1, numbers, from_turns=True)
    assert [ev["tag"] for ev in res.events.values()] == ["adoption", "shelter", "flat"]
    assert [ev["time"] for ev in res.events.values()] == ["2023-05-01", "2023-04-20", "2023-05-01"]
    assert [ev["topics"] for ev in res.events.values()] == [["D1:t1"], ["D1:t1", "D1:t2"], []]
    assert res.notes == ["rewrite: dropped times with unknown origin ['7']"]


def test_a_tag_that_only_names_a_speaker_becomes_other() -> None:
    """The 1.5B model tagged every turn with its speaker's name: a tag that links all of a speaker's turns
    to each other says less than none."""
    conv = make_conversation([SESSIONS[0][:3]])
    window = list(conv.sessions[0].turns)
    speakers = [t.speaker for t in window]
    rows = [[speakers[0], [1]], [speakers[1].lower(), [1]], [f"{speakers[0]} cat", [1]]]
    reply = turn_rewrite_reply(1, 3).model_validate({"topics": ["pets"], "turns": rows, "times": [], "facts": []})
    res = validate_rewrite(reply, window, "2023-05-01", 1, 1, {str(t.index): t.id for t in window}, from_turns=True)
    assert [ev["tag"] for ev in res.events.values()] == ["Other", "Other", f"{speakers[0]} cat"]
    assert res.notes == []  # like an empty tag: nothing fell back


# --- derived labels (mra_turn_labels="derived", the default) -------------------------------------------


def test_derived_labels_rows_are_topic_numbers_and_tag_and_date_come_from_topic_and_text(data_dir: str) -> None:
    model = ingest_model(time_for=lambda tid: "2020-01-01")  # a date the reply may not carry: never read
    ctx, report = turn_ingest(data_dir, model=model, mra_turn_labels="derived")
    assert AllMethodsContext().mra_turn_labels == "derived" and AllMethodsContext(profile="paper").mra_turn_labels == "llm"
    call = model.calls[0]
    n_first = len(SESSIONS[0])
    schema = call["kwargs"]["response_format"]["schema"]
    assert schema == turn_rewrite_schema(1, n_first, derived=True) and "times" not in schema["properties"]
    assert schema["properties"]["turns"]["items"]["items"]["type"] == "integer"  # a row: topic numbers only
    prompt = str(call["messages"][0].content)
    assert "tag" not in prompt.split("Session date:")[0] and "times" not in prompt.split("Session date:")[0]
    assert not report.fallbacks
    g = graph(data_dir)
    first = g.events["D1:1-1"]  # "I adopted a grey cat named Pixel yesterday." said on 2023-05-01
    assert (first["tag"], first["time"], first["topics"]) == ("daily life", "2023-04-30", ["D1:t1"])
    assert g.events["D1:2-1"]["time"] == "2023-05-01"  # names no day: the session date
    assert {e["tag"] for e in g.events.values()} == {"daily life"}
    assert g.timeline["2023-04-30"] == ["D1:1-1"]


def test_derived_labels_read_rows_of_numbers_and_drop_a_topic_named_only_by_a_speaker() -> None:
    conv = make_conversation([SESSIONS[0][:3]])
    window = list(conv.sessions[0].turns)
    reply = turn_rewrite_reply(1, 3, True).model_validate(
        {"topics": ["Ann", "grey cat adoption"], "turns": [[2], [1, 2], []], "facts": []})
    res = validate_rewrite(reply, window, "2023-05-01", 1, 1, {str(t.index): t.id for t in window},
                           from_turns=True, derived=True)
    assert [ev["topics"] for ev in res.events.values()] == [["D1:t2"], ["D1:t1", "D1:t2"], []]
    assert [ev["tag"] for ev in res.events.values()] == ["grey cat adoption", "Other", "Other"]
