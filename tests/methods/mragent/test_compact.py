"""MRAgent ingestion reply formats (`mra_ingest_format`): the compact arrays build the same memory as
the spec's keyed JSON with fewer generated tokens; parsing reads either shape in every mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recollect.graphs.mragent.cues import MAX_CUES, STOPWORDS, fallback_cues
from recollect.graphs.mragent.formats import (
    CompactCueReply,
    CompactRewriteReply,
    CueReply,
    MergedRewriteReply,
    RewriteReply,
    compact_rewrite_schema,
)
from recollect.graphs.mragent.ingest_formats import FORMATS
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.validation import apply_cues, validate_rewrite
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.llm.usage import estimate_tokens
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation
from tests.methods.mragent.fakes import compact_rewrite, json_rewrite

SESSION_DATE = "2023-05-01"  # make_conversation: "10:00 am on 1 May, 2023"

# A realistic window: twelve turns of a LoCoMo-like chat, and what a model should make of it.
TURNS = [
    ("Maya", "Hey Leo! I finally signed up for the pottery class at the community center yesterday."),
    ("Leo", "That's great, Maya! What made you decide to try pottery?"),
    ("Maya", "I wanted a hobby away from screens. My sister Nina took it last year and loved it."),
    ("Leo", "Nice. I've been busy training for the city half marathon next month."),
    ("Maya", "Wow, how far do you run each week?"),
    ("Leo", "About forty kilometers. I run along the river with my dog Biscuit every morning."),
    ("Maya", "Biscuit must love that! Is he the golden retriever from your photo?"),
    ("Leo", "Yes, he's three now. He gets excited whenever I grab my running shoes."),
    ("Maya", "By the way, I'm moving to a new apartment in Oakridge at the end of the month."),
    ("Leo", "Exciting! Do you need help with the move? I have a van."),
    ("Maya", "That would be amazing, thank you. The movers cancelled on me last week."),
    ("Leo", "No problem. Just send me the date and I'll be there."),
]
CAPTIONS = {"D1:7": "a golden retriever sitting on a riverbank"}
TOPICS = ["Maya's pottery class", "Leo's running and his dog", "Maya's move to Oakridge"]
# (turn number, sentence, tag, topic numbers, date or "" for the session date, cues)
SENTENCES = [
    (1, "Maya signed up for the pottery class at the community center.", "pottery class", [1], "2023-04-30",
     ["Maya", "signed up", "pottery class", "community center"]),
    (2, "Leo asked what made Maya decide to try pottery.", "pottery", [1], "", ["Leo", "Maya", "try pottery"]),
    (3, "Maya wanted a hobby away from screens.", "hobby", [1], "", ["Maya", "hobby", "screens"]),
    (3, "Maya's sister Nina took the pottery class last year and loved it.", "sister", [1], "2022-07-02",
     ["Nina", "sister", "pottery class", "last year"]),
    (4, "Leo has been training for the city half marathon next month.", "half marathon", [2], "2023-06-15",
     ["Leo", "training", "city half marathon", "next month"]),
    (5, "Maya asked how far Leo runs each week.", "running", [2], "", ["Maya", "Leo", "runs", "each week"]),
    (6, "Leo runs about forty kilometers each week.", "running", [2], "", ["Leo", "forty kilometers", "each week"]),
    (6, "Leo runs along the river with his dog Biscuit every morning.", "dog", [2], "",
     ["Leo", "river", "dog", "Biscuit", "every morning"]),
    (7, "Maya asked if Biscuit is the golden retriever from Leo's photo.", "dog", [2], "",
     ["Maya", "Biscuit", "golden retriever", "photo"]),
    (8, "Biscuit is three years old and gets excited when Leo grabs his running shoes.", "dog", [2], "",
     ["Biscuit", "three years old", "excited", "running shoes"]),
    (9, "Maya is moving to a new apartment in Oakridge at the end of the month.", "moving", [3], "2023-05-31",
     ["Maya", "moving", "new apartment", "Oakridge", "end of the month"]),
    (10, "Leo offered to help Maya with the move because Leo has a van.", "moving help", [3], "",
     ["Leo", "help", "Maya", "move", "van"]),
    (11, "Maya thanked Leo because the movers cancelled on Maya last week.", "movers", [3], "2023-04-24",
     ["Maya", "Leo", "movers", "cancelled", "last week"]),
    (12, "Leo asked Maya to send the date of the move.", "moving help", [3], "", ["Leo", "Maya", "date"]),
]
FACTS = [
    (3, "Maya", "family", "Maya has a sister named Nina"),
    (3, "Maya", "hobbies", "Maya takes a pottery class"),
    (6, "Leo", "pets", "Leo has a golden retriever named Biscuit"),
    (9, "Maya", "home", "Maya is moving to an apartment in Oakridge"),
]


def event_ids() -> list[str]:
    out, seen = [], {}
    for n, *_ in SENTENCES:
        seen[n] = seen.get(n, 0) + 1
        out.append(f"D1:{n}-{seen[n]}")
    return out


def content(json_ids: bool) -> dict[str, Any]:
    """The window's content in the fakes' format-free form; refs are turn ids (json) or numbers."""
    def ref(n: int) -> str:
        return f"D1:{n}" if json_ids else str(n)

    return {"sentences": [(ref(n), text, tag, topics, time or (SESSION_DATE if json_ids else ""), cues)
                          for n, text, tag, topics, time, cues in SENTENCES],
            "topics": list(TOPICS), "facts": [(ref(n), p, a, f) for n, p, a, f in FACTS]}


def json_replies() -> list[Any]:
    """The spec's keyed replies: the json prompt asks for the session date when no time is mentioned."""
    cues = {"sentences": [{"id": eid, "cues": s[5]} for eid, s in zip(event_ids(), SENTENCES, strict=True)]}
    return [json_rewrite(content(json_ids=True), conversation_time=SESSION_DATE), cues]


def compact_replies() -> list[Any]:
    cues = {"cues": [[str(i), *s[5]] for i, s in enumerate(SENTENCES, start=1)]}
    return [compact_rewrite(content(json_ids=False)), cues]


def merged_replies() -> list[Any]:
    return [compact_rewrite(content(json_ids=False), merged=True)]


def build(path: Path, fmt: str, replies: list[Any], **ctx_kw: Any) -> tuple[CueTagGraph, Any, ScriptedChatModel]:
    """Ingest the realistic window in `fmt` with scripted replies; tokens are estimated from the texts."""
    model = ScriptedChatModel(script=list(replies), with_usage=False)
    conv = make_conversation([TURNS], captions=CAPTIONS)
    ctx_kw.setdefault("mra_ingest_cues", "llm")  # these are call B's formats; lexical cues make no call B
    ctx_kw.setdefault("mra_ingest_sentences", "llm")  # and call A's sentences (test_sentences.py: the turns)
    ctx = AllMethodsContext(data_dir=str(path), chat_model=model, mra_ingest_format=fmt, **ctx_kw)
    report = ingest_conversation(conv, "ns", ctx, methods=["mragent"])[-1]
    return CueTagGraph.load(open_workspace(str(path)), "ns"), report, model


def memory(g: CueTagGraph) -> dict[str, Any]:
    return {"events": g.events, "topics": g.topics, "persona": g.persona, "cues": g.cues, "timeline": g.timeline,
            "facts": [s["facts"] for s in g.sessions.values()]}


@pytest.mark.parametrize(("fmt", "replies"), [("compact", compact_replies), ("compact_merged", merged_replies)])
def test_compact_replies_build_the_same_memory_as_json(tmp_path: Path, fmt: str, replies: Any) -> None:
    ref, ref_report, _ = build(tmp_path / "json", "json", json_replies())
    got, report, model = build(tmp_path / fmt, fmt, replies())
    assert memory(got) == memory(ref)
    assert not ref_report.fallbacks and not report.fallbacks  # nothing dropped, discarded or filled in
    assert len(model.calls) == (1 if fmt == "compact_merged" else 2)
    # the memory is what the content says: sentences, "" = the session date, topics, facts, cues
    assert list(got.events) == event_ids()
    assert got.events["D1:2-1"]["time"] == SESSION_DATE and got.events["D1:1-1"]["time"] == "2023-04-30"
    assert got.events["D1:7-1"]["content"].endswith("[shared image: a golden retriever sitting on a riverbank]")
    assert [t["text"] for t in got.topics.values()] == TOPICS and got.events["D1:9-1"]["topics"] == ["D1:t3"]
    assert got.persona["Leo"]["pets"] == [{"origin": "D1:6", "fact": "Leo has a golden retriever named Biscuit"}]
    assert got.events["D1:6-2"]["cues"] == ["Leo", "river", "dog", "Biscuit", "every morning"]


def test_compact_replies_are_at_least_30_percent_fewer_tokens(tmp_path: Path) -> None:
    """Completion tokens (the project's estimator) for the same content, measured through ingestion."""
    _, old, _ = build(tmp_path / "json", "json", json_replies())
    _, new, _ = build(tmp_path / "compact", "compact", compact_replies())
    _, merged, _ = build(tmp_path / "merged", "compact_merged", merged_replies())
    by_text = [sum(estimate_tokens(json.dumps(r)) for r in replies())
               for replies in (json_replies, compact_replies, merged_replies)]
    assert [old.completion_tokens, new.completion_tokens, merged.completion_tokens] == by_text
    print(f"\ncompletion tokens for one 12-turn window: json {old.completion_tokens}, compact {new.completion_tokens}"
          f" ({1 - new.completion_tokens / old.completion_tokens:.0%} fewer), compact_merged"
          f" {merged.completion_tokens} ({1 - merged.completion_tokens / old.completion_tokens:.0%} fewer);"
          f" prompt tokens: json {old.prompt_tokens}, compact {new.prompt_tokens}, compact_merged {merged.prompt_tokens}")
    assert new.completion_tokens <= 0.7 * old.completion_tokens
    # merging call B into call A is measured, not assumed: fewer generated and far fewer prompt tokens
    assert merged.completion_tokens < new.completion_tokens
    assert merged.prompt_tokens < 0.8 * new.prompt_tokens
    assert new.prompt_tokens < old.prompt_tokens


@pytest.mark.parametrize("origins", ["numbers", "turn ids"])
def test_a_keyed_reply_in_compact_mode_still_parses(tmp_path: Path, origins: str) -> None:
    """The small model may answer the compact prompt with the spec's keyed objects (by number or id)."""
    ref, _, _ = build(tmp_path / "compact", "compact", compact_replies())
    keyed = json_rewrite(content(json_ids=origins == "turn ids"), conversation_time=SESSION_DATE)
    ids = [str(i) for i in range(1, len(SENTENCES) + 1)] if origins == "numbers" else event_ids()
    cues = {"sentences": [{"id": i, "cues": s[5]} for i, s in zip(ids, SENTENCES, strict=True)]}
    got, report, _ = build(tmp_path / "keyed", "compact", [keyed, cues])
    assert memory(got) == memory(ref) and not report.fallbacks


def test_compact_arrays_in_json_mode_still_parse(tmp_path: Path) -> None:
    ref, _, _ = build(tmp_path / "json", "json", json_replies())
    c = content(json_ids=True)
    arrays = {"topics": TOPICS,
              "sentences": [[r, text, tag, [f"t{n}" for n in tps], time] for r, text, tag, tps, time, _ in c["sentences"]],
              "facts": [list(f) for f in c["facts"]]}
    rows = {"cues": [[eid, *s[5]] for eid, s in zip(event_ids(), SENTENCES, strict=True)]}
    got, report, _ = build(tmp_path / "arrays", "json", [arrays, rows])
    assert memory(got) == memory(ref) and not report.fallbacks


def test_unknown_ids_are_dropped_and_reported_in_compact_mode(tmp_path: Path) -> None:
    rewrite, cues = compact_replies()
    rewrite["sentences"] += [[99, "A turn that does not exist.", "ghost", [1], ""],
                             ["D7:1", "Another invented turn.", "ghost", [], ""]]
    rewrite["sentences"] = [s for s in rewrite["sentences"] if s[0] != 5]  # turn 5 left out
    rewrite["facts"].append([42, "Maya", "pets", "Maya has a ghost"])
    cues["cues"] += [["77", "ghost"], ["D9:9-1", "ghost"]]
    _, report, _ = build(tmp_path / "c", "compact", [rewrite, cues])
    g = CueTagGraph.load(open_workspace(str(tmp_path / "c")), "ns")
    notes = " | ".join(report.fallbacks)
    assert "unknown origin ['99', 'D7:1']" in notes and "'42'" in notes and "['77', 'D9:9-1']" in notes
    assert "ghost" not in {e["tag"] for e in g.events.values()} and "ghost" not in g.cues
    assert {ev["origin"] for ev in g.events.values()} == {f"D1:{i}" for i in range(1, 13)}  # every turn has an event
    fallback = g.events["D1:5-1"]
    assert fallback["tag"] == "Other" and fallback["rewritten"] == TURNS[4][1] and fallback["time"] == SESSION_DATE
    assert all(f["fact"] != "Maya has a ghost" for facts in g.persona["Maya"].values() for f in facts)


def test_empty_time_is_the_session_date_and_topics_go_by_number() -> None:
    conv = make_conversation([TURNS[:3]])
    window = list(conv.sessions[0].turns)
    reply = CompactRewriteReply.model_validate({
        "topics": ["pottery", "", "family"],
        "sentences": [[1, "Maya signed up for pottery.", "pottery", [1, 2, 9], ""],
                      [2, "Leo asked about pottery.", "", 1, "not a date"],
                      ["3", "Nina took the class in 2022.", "sister", ["3"], "2022-07-02"]],
        "facts": []})
    numbers = {str(t.index): t.id for t in window}
    res = validate_rewrite(reply, window, SESSION_DATE, 1, 1, numbers)
    assert [ev["time"] for ev in res.events.values()] == [SESSION_DATE, SESSION_DATE, "2022-07-02"]
    assert res.events["D1:2-1"]["tag"] == "Other"
    # the empty topic is skipped, so "family" (number 3) becomes the window's second topic
    assert {gid: t["text"] for gid, t in res.topics.items()} == {"D1:t1": "pottery", "D1:t2": "family"}
    assert [ev["topics"] for ev in res.events.values()] == [["D1:t1"], ["D1:t1"], ["D1:t2"]]


def test_cue_numbers_resolve_and_the_verbatim_check_still_applies() -> None:
    def event(origin: str, text: str) -> dict[str, Any]:
        return {"origin": origin, "speaker": "Ann", "rewritten": text, "cues": []}

    events = {"D1:3-1": event("D1:3", "Ann planted tomatoes."), "D1:4-1": event("D1:4", "Ann bought a violin.")}
    reply = CompactCueReply.model_validate({"cues": [["1", "tomatoes", "unicorn"], [2, "violin"], ["5", "x"]]})
    notes = apply_cues(reply, events, numbers={"1": "D1:3-1", "2": "D1:4-1"})
    assert events["D1:3-1"]["cues"] == ["tomatoes", "Ann"] and events["D1:4-1"]["cues"] == ["violin", "Ann"]
    assert any("discarded 1 cue" in n for n in notes) and any("['5']" in n for n in notes)
    assert not any("named a turn" in n for n in notes)


def test_format_is_part_of_the_cache_key_and_the_session_stamp(data_dir: str) -> None:
    """json → compact → json on one namespace: the compact build makes its own calls (no reply is shared),
    and going back to json rebuilds from json's cached replies with no call."""
    conv = make_conversation([TURNS], captions=CAPTIONS)
    model = ScriptedChatModel(script=[*json_replies(), *compact_replies()])

    def run(fmt: str) -> Any:
        ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mra_ingest_format=fmt, mra_ingest_cues="llm",
                                mra_ingest_sentences="llm")
        return ingest_conversation(conv, "ns", ctx, methods=["mragent"])[-1]

    first, second, third, again = run("json"), run("compact"), run("json"), run("json")
    assert (first.llm_calls, second.llm_calls, third.llm_calls, again.llm_calls) == (2, 2, 0, 0)
    assert (second.sessions, third.sessions, again.sessions) == (1, 1, 0)
    assert third.cached_calls == 2
    assert not model.script  # every scripted reply used exactly once


def test_merged_mode_asks_for_cues_only_when_the_rewrite_brought_none(tmp_path: Path) -> None:
    rewrite, cues = compact_replies()  # a compact rewrite: no cue arrays in it
    ref, _, _ = build(tmp_path / "compact", "compact", compact_replies())
    got, report, model = build(tmp_path / "merged", "compact_merged", [rewrite, cues])
    assert len(model.calls) == 2 and memory(got) == memory(ref)
    assert str(model.calls[1]["messages"][0].content).startswith("For each sentence")
    assert any("wrote no cues" in f for f in report.fallbacks)


def test_schemas_sent_to_the_endpoint(tmp_path: Path) -> None:
    """json sends the spec's keyed schema unchanged; compact sends arrays with caps against loops."""
    _, _, old = build(tmp_path / "json", "json", json_replies())
    _, _, new = build(tmp_path / "compact", "compact", compact_replies())
    sent = [c["kwargs"]["response_format"]["schema"] for c in (*old.calls, *new.calls)]
    assert sent[0] == RewriteReply.model_json_schema() and sent[1] == CueReply.model_json_schema()
    assert set(sent[0]["$defs"]["RewriteSentence"]["properties"]) == {"id", "origin", "text", "tag", "topics", "time"}
    a, b = sent[2], sent[3]
    assert a == compact_rewrite_schema(with_cues=False) and b == CompactCueReply.model_json_schema()
    assert a["required"] == ["topics", "sentences", "facts"]
    row = a["properties"]["sentences"]["items"]
    assert [x.get("type") for x in row["prefixItems"]] == ["integer", "string", "string", "array", "string"]
    assert row["prefixItems"][1]["maxLength"] and row["prefixItems"][3]["maxItems"] and row["prefixItems"][4]["pattern"]
    assert a["properties"]["topics"]["maxItems"] == 10 and a["properties"]["sentences"]["maxItems"]
    assert b["properties"]["cues"]["maxItems"] and b["properties"]["cues"]["items"]["maxItems"] == 31
    merged = MergedRewriteReply.model_json_schema()["properties"]["sentences"]["items"]["prefixItems"]
    assert merged[5]["maxItems"] == 30 and merged[5]["items"]["maxLength"]
    # completion caps: the compact calls may generate less than the json ones
    assert new.calls[0]["kwargs"]["max_tokens"] < old.calls[0]["kwargs"]["max_tokens"]
    assert new.calls[1]["kwargs"]["max_tokens"] < old.calls[1]["kwargs"]["max_tokens"]
    assert set(FORMATS) == {"compact", "compact_merged", "json"}


def test_compact_prompts_put_the_instructions_first(tmp_path: Path) -> None:
    """Static first, data last: every compact call of a kind starts with the same text, so the server's
    prefix cache can reuse it from one window to the next."""
    sessions = [TURNS[:6], TURNS[6:]]
    model = ScriptedChatModel(script=[*compact_replies(), *compact_replies()])
    conv = make_conversation(sessions)
    ctx = AllMethodsContext(data_dir=str(tmp_path), chat_model=model, mra_ingest_cues="llm",
                           mra_ingest_sentences="llm")  # the default format is compact
    assert ctx.mra_ingest_format == "compact"
    ingest_conversation(conv, "ns", ctx, methods=["mragent"])
    prompts = model.prompts()
    assert len(prompts) == 4
    for first, second, data_marker in ((prompts[0], prompts[2], "Session date:"), (prompts[1], prompts[3], "Sentences (")):
        static = first[: first.index(data_marker)]
        assert second.startswith(static)
        assert "Reply with one JSON object" in static
    assert "1 | Maya: Hey Leo!" in prompts[0] and "D1:1" not in prompts[0]


def test_lexical_cues_make_no_cue_call_and_keep_each_sentences_content_words(tmp_path: Path) -> None:
    """`mra_ingest_cues=lexical` (the default): call A only; each sentence's cues are its content words
    (verbatim, no stopwords, up to the spec's 30) plus the speaker, through the same cue index."""
    rewrite, _ = compact_replies()
    assert AllMethodsContext().mra_ingest_cues == "lexical"
    g, report, model = build(tmp_path, "compact", [rewrite], mra_ingest_cues="lexical")
    assert len(model.calls) == report.llm_calls == 1
    assert str(model.calls[0]["messages"][0].content).startswith("Rewrite this conversation")
    assert not any("keywords" in f or "cue extraction" in f for f in report.fallbacks)
    ev = g.events["D1:11-1"]
    assert ev["rewritten"] == "Maya thanked Leo because the movers cancelled on Maya last week."
    assert ev["cues"] == ["Maya", "thanked", "Leo", "because", "movers", "cancelled", "last", "week"]
    for ev in g.events.values():
        assert ev["cues"][:-1] == fallback_cues(ev["rewritten"], MAX_CUES) or ev["speaker"] in ev["cues"][:-1]
        assert ev["speaker"] in ev["cues"]
        assert not {c.lower() for c in ev["cues"]} & STOPWORDS
    assert "D1:11-1" in [e for ids in g.cues["movers"]["tags"].values() for e in ids]


def test_switching_the_cue_source_relinks_from_the_cached_rewrite(data_dir: str) -> None:
    """The cue source is part of the session stamp: llm → lexical rebuilds with no call (call A comes
    from the cache), and lexical → llm reads call B from the cache too."""
    conv = make_conversation([TURNS], captions=CAPTIONS)
    model = ScriptedChatModel(script=compact_replies())

    def run(cues: str) -> Any:
        ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mra_ingest_cues=cues, mra_ingest_sentences="llm")
        return ingest_conversation(conv, "ns", ctx, methods=["mragent"])[-1]

    first = run("llm")
    llm_cues = CueTagGraph.load(open_workspace(data_dir), "ns").events["D1:4-1"]["cues"]
    second = run("lexical")
    lexical_cues = CueTagGraph.load(open_workspace(data_dir), "ns").events["D1:4-1"]["cues"]
    third, again = run("llm"), run("llm")
    assert (first.llm_calls, second.llm_calls, third.llm_calls, again.llm_calls) == (2, 0, 0, 0)
    assert (second.sessions, third.sessions, again.sessions) == (1, 1, 0)
    assert llm_cues == ["Leo", "training", "city half marathon", "next month"]
    assert lexical_cues == ["Leo", "training", "city", "half", "marathon", "next", "month"]
    assert CueTagGraph.load(open_workspace(data_dir), "ns").events["D1:4-1"]["cues"] == llm_cues


def test_content_words_skip_contractions_of_stopwords() -> None:
    assert fallback_cues("I'm sure it's Maya's cat, don't worry", MAX_CUES) == ["sure", "Maya's", "cat", "worry"]
