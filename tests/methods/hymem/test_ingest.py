"""HyMem ingestion (graphs/hymem/README.md) with a scripted model."""

from __future__ import annotations

import re
from typing import Any

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.hymem.memory import SUMMARY_KIND, load_sessions, load_summaries, session_text
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.cache import cache_key
from recollect.llm.models import model_name
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation

LINE = re.compile(r"^\[(D\d+:\d+)\] ([^:\n]+): (.*)$", re.M)

SESSIONS = [
    [("Ann", "I adopted a grey cat named Pixel"), ("Bob", "Lovely, how old is Pixel?"), ("Ann", "Two years old")],
    [("Bob", "I ran the Berlin marathon"), ("Ann", "Well done on the marathon")],
    [("Ann", "I moved to Porto for a bakery job"), ("Bob", "Porto is beautiful")],
]


def per_turn_summaries(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A well-behaved summariser: one item per turn, linked to it."""
    return {"items": [{"text": f"{s} said: {t}", "turn_ids": [i]} for i, s, t in LINE.findall(messages[-1].content)]}


def ingest(data_dir: str, model: ScriptedChatModel, sessions: list[list[tuple[str, str]]] = SESSIONS,
           **settings: Any) -> tuple[AllMethodsContext, list[Any]]:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, **settings)
    reports = ingest_conversation(make_conversation(sessions), "ns", ctx, methods=["hymem"])
    return ctx, reports


def test_one_call_per_session_then_zero_on_reingest(data_dir: str) -> None:
    model = ScriptedChatModel(default=per_turn_summaries)
    ctx, reports = ingest(data_dir, model)
    assert len(model.calls) == 3 and reports[-1].llm_calls == 3
    n_summaries = open_workspace(data_dir).index(SUMMARY_KIND, "ns").count()
    _, again = ingest(data_dir, model)
    assert len(model.calls) == 3, "re-ingest made an LLM call"
    assert again[-1].llm_calls == 0 and again[-1].embedded == 0
    assert open_workspace(data_dir).index(SUMMARY_KIND, "ns").count() == n_summaries  # no duplicates


def test_every_summary_links_to_its_session_and_a_turn_of_it(data_dir: str) -> None:
    ingest(data_dir, ScriptedChatModel(default=per_turn_summaries))
    ws = open_workspace(data_dir)
    sessions = load_sessions(ws, "ns")
    units = ws.index(SUMMARY_KIND, "ns").all()
    assert units
    for u in units:
        sid = u.metadata["session"]
        assert u.id.startswith(sid + ".")
        assert u.turn_ids and set(u.turn_ids) <= set(sessions[sid]["turn_ids"])
        assert u.metadata["date"]
    # Level-2 text: a date header then one `[id] speaker: text` line per turn.
    conv = make_conversation(SESSIONS)
    assert sessions["S1"]["text"] == session_text(conv.sessions[0])
    assert sessions["S1"]["text"].splitlines()[1] == "[D1:1] Ann: I adopted a grey cat named Pixel"
    # Corpus order: session order, then item order.
    assert list(load_summaries(ws, "ns")) == [f"S{s}.{k}" for s, n in ((1, 3), (2, 2), (3, 2)) for k in range(n)]


def test_invalid_turn_ids_are_replaced_by_the_two_nearest_turns(data_dir: str) -> None:
    def reply(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if "[D1:1]" in messages[-1].content:
            return {"items": [{"text": "Ann adopted a grey cat named Pixel, two years old", "turn_ids": ["D9:9", "x"]},
                              {"text": "   ", "turn_ids": ["D1:1"]}]}
        return per_turn_summaries(messages, kwargs)

    _, reports = ingest(data_dir, ScriptedChatModel(default=reply), hymem_turns_per_summary=0)
    s1 = [s for s in load_summaries(open_workspace(data_dir), "ns").values() if s["session"] == "S1"]
    assert len(s1) == 1, "the empty-text item must be dropped"
    assert len(s1[0]["turn_ids"]) == 2
    assert set(s1[0]["turn_ids"]) <= {"D1:1", "D1:2", "D1:3"}
    assert "D1:1" in s1[0]["turn_ids"]  # the turn the sentence paraphrases is among the nearest
    assert any("nearest turns" in f for f in reports[-1].fallbacks)


def test_malformed_reply_twice_falls_back_to_one_summary_per_turn(data_dir: str) -> None:
    model = ScriptedChatModel(script=["not json at all", {"items": []}], default=per_turn_summaries)
    _, reports = ingest(data_dir, model)
    assert len(model.calls) == 4  # session 1: call + retry; sessions 2, 3: one call each
    s1 = [s for s in load_summaries(open_workspace(data_dir), "ns").values() if s["session"] == "S1"]
    assert [s["turn_ids"] for s in s1] == [["D1:1"], ["D1:2"], ["D1:3"]]
    assert s1[0]["text"] == "[D1:1] Ann: I adopted a grey cat named Pixel"
    assert any(f.startswith("S1: summary fallback") for f in reports[-1].fallbacks)
    assert load_sessions(open_workspace(data_dir), "ns")["S1"]["fallback"] is True


def test_plain_string_items_are_accepted_and_linked(data_dir: str) -> None:
    model = ScriptedChatModel(default={"items": ["Someone talked about something"]})
    ingest(data_dir, model, hymem_turns_per_summary=0)
    for s in load_summaries(open_workspace(data_dir), "ns").values():
        assert len(s["turn_ids"]) == 2


def test_new_sessions_are_added_incrementally(data_dir: str) -> None:
    model = ScriptedChatModel(default=per_turn_summaries)
    ingest(data_dir, model, SESSIONS[:2])
    assert len(model.calls) == 2
    ingest(data_dir, model, SESSIONS)
    assert len(model.calls) == 3  # only the new session
    assert "S3" in load_sessions(open_workspace(data_dir), "ns")


def test_cached_reply_is_reused_when_the_index_was_lost(data_dir: str) -> None:
    model = ScriptedChatModel(default=per_turn_summaries)
    ingest(data_dir, model)
    ws = open_workspace(data_dir)
    ws.index(SUMMARY_KIND, "ns").delete(["S2.0"])  # a crash between Chroma and the doc store
    _, reports = ingest(data_dir, model)
    assert len(model.calls) == 3 and reports[-1].cached_calls == 1
    assert ws.index(SUMMARY_KIND, "ns").count() == 7


LONG = [[("Ann" if k % 2 else "Bob", f"event {k}: something about hobby number {k}") for k in range(1, 9)]]  # 8 turns


def one_item_unless_told(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A summariser that writes one item, and one per turn only once the retry names the minimum."""
    if "write at least" in str(messages[-1].content) and len(messages) > 1:
        return per_turn_summaries(messages[:1], kwargs)
    return {"items": [{"text": "Ann and Bob talked about hobbies", "turn_ids": ["D1:1"]}]}


def test_a_too_sparse_summary_is_retried_once_with_the_minimum(data_dir: str) -> None:
    model = ScriptedChatModel(default=one_item_unless_told)
    _, reports = ingest(data_dir, model, LONG)
    assert len(model.calls) == 2  # the call and one retry
    first_prompt = str(model.calls[0]["messages"][0].content)
    assert "This session has 8 turns: write at least 2 sentences" in first_prompt
    retry = str(model.calls[1]["messages"][-1].content)
    assert "only 1 item(s) for a session of 8 turns: write at least 2 items" in retry
    summaries = load_summaries(open_workspace(data_dir), "ns")
    assert len(summaries) == 8 and not reports[-1].fallbacks


def test_still_sparse_after_the_retry_keeps_the_items_and_is_not_redone(data_dir: str) -> None:
    sparse = {"items": [{"text": "Ann and Bob talked about hobbies", "turn_ids": ["D1:1", "D1:2"]}]}
    model = ScriptedChatModel(default=sparse)
    _, reports = ingest(data_dir, model, LONG)
    assert len(model.calls) == 2
    summaries = list(load_summaries(open_workspace(data_dir), "ns").values())
    # the kept item, then a turn line for each turn it does not link to
    assert [s["turn_ids"] for s in summaries] == [["D1:1", "D1:2"]] + [[f"D1:{k}"] for k in range(3, 9)]
    assert summaries[1]["text"] == "[D1:3] Ann: event 3: something about hobby number 3"
    assert any("after the density retry" in f for f in reports[-1].fallbacks)
    assert any("6 turn(s) no summary links to" in f for f in reports[-1].fallbacks)
    assert load_sessions(open_workspace(data_dir), "ns")["S1"]["fallback"] is False
    ingest(data_dir, model, LONG)
    assert len(model.calls) == 2  # a kept (coarse) summary is cached like any good one


def summary_cache_key(model: ScriptedChatModel, sessions: list[list[tuple[str, str]]], min_items: int) -> str:
    """The cache key of the first session's summary call (as `memory._summarise` builds it)."""
    text = session_text(make_conversation(sessions).sessions[0])
    return cache_key("ns", "hymem", "summarise", model_name(model), 0.0, {"session": text, "min_items": min_items})


def test_the_cache_entry_is_the_items_the_ingest_used(data_dir: str) -> None:
    model = ScriptedChatModel(default=one_item_unless_told)
    ingest(data_dir, model, LONG)
    entry = open_workspace(data_dir).docs.cache_get(summary_cache_key(model, LONG, 2))
    assert entry == {"items": [{"text": f"{'Ann' if k % 2 else 'Bob'} said: event {k}: something about hobby number {k}",
                                "turn_ids": [f"D1:{k}"]} for k in range(1, 9)]}


def test_a_cached_sparse_reply_is_reused_when_only_the_links_change(data_dir: str) -> None:
    """A reply kept after the density retry is cached and read back as it is, although it has fewer
    items than the call's schema allows (a new link cap changes the session hash, not the cache key)."""
    sparse = {"items": [{"text": "Ann and Bob talked about hobbies", "turn_ids": ["D1:1", "D1:2"]}]}
    model = ScriptedChatModel(default=sparse)
    ingest(data_dir, model, LONG)
    _, again = ingest(data_dir, model, LONG, hymem_max_turns_per_item=1)
    assert len(model.calls) == 2 and again[-1].cached_calls == 1 and again[-1].llm_calls == 0
    summaries = list(load_summaries(open_workspace(data_dir), "ns").values())
    assert summaries[0]["text"] == "Ann and Bob talked about hobbies" and len(summaries[0]["turn_ids"]) == 1
    assert len(summaries) == 8  # the item keeps one turn; the other seven get turn lines


def test_an_entry_in_hymems_cache_format_is_used_without_a_call(data_dir: str) -> None:
    """`{"items": [...]}` (what HyMem has always cached) is reused as stored, a sparse one included."""
    model = ScriptedChatModel(default="not json")
    ws = open_workspace(data_dir)
    ws.docs.cache_put(summary_cache_key(model, LONG, 2),
                      {"items": [{"text": "Ann and Bob talked about hobbies", "turn_ids": ["D1:3"]}]})
    _, reports = ingest(data_dir, model, LONG)
    assert not model.calls and reports[-1].cached_calls == 1
    summaries = list(load_summaries(open_workspace(data_dir), "ns").values())
    assert summaries[0] == {**summaries[0], "text": "Ann and Bob talked about hobbies", "turn_ids": ["D1:3"]}
    assert load_sessions(open_workspace(data_dir), "ns")["S1"]["fallback"] is False


def test_density_check_off_accepts_one_item(data_dir: str) -> None:
    model = ScriptedChatModel(default={"items": [{"text": "Ann and Bob talked about hobbies", "turn_ids": ["D1:1"]}]})
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, hymem_turns_per_summary=0)
    ingest_conversation(make_conversation(LONG), "ns", ctx, methods=["hymem"])
    assert len(model.calls) == 1 and "write at least 1 sentences" in str(model.calls[0]["messages"][0].content)


def test_a_session_that_fell_back_is_summarised_again_on_the_next_ingest(data_dir: str) -> None:
    broken = ScriptedChatModel(script=["not json", "still not json"], default=per_turn_summaries)
    _, first = ingest(data_dir, broken)
    assert load_sessions(open_workspace(data_dir), "ns")["S1"]["fallback"] is True
    good = ScriptedChatModel(default=lambda m, k: {"items": [{"text": "Ann adopted Pixel, a two-year-old grey cat",
                                                              "turn_ids": ["D1:1", "D1:3"]}]})
    _, again = ingest(data_dir, good)
    assert len(good.calls) == 1 and again[-1].llm_calls == 1  # only the session that fell back
    ws = open_workspace(data_dir)
    assert load_sessions(ws, "ns")["S1"]["fallback"] is False
    s1 = [s for s in load_summaries(ws, "ns").values() if s["session"] == "S1"]
    assert [s["turn_ids"] for s in s1] == [["D1:1", "D1:3"], ["D1:2"]]  # the fallback's per-turn items are gone
    assert ws.index(SUMMARY_KIND, "ns").count() == 2 + 2 + 2
    ingest(data_dir, good)
    assert len(good.calls) == 1


def test_custom_turn_ids_link_summaries(data_dir: str) -> None:
    turns = tuple(Turn(id=i, speaker=spk, text=t, session=1, index=k, date_time="1 May, 2023")
                  for k, (i, spk, t) in enumerate([("ann-cat", "Ann", "I adopted a cat named Pixel"),
                                                   ("bob-q1", "Bob", "What does Pixel eat?")], start=1))
    conv = Conversation(id="custom", speakers=("Ann", "Bob"), sessions=(Session(1, "1 May, 2023", None, turns),))
    model = ScriptedChatModel(default={"items": [{"text": "Ann adopted Pixel; Bob asked what Pixel eats",
                                                  "turn_ids": "[ann-cat], BOB-Q1, D1:1"}]})
    ingest_conversation(conv, "ns", AllMethodsContext(data_dir=data_dir, chat_model=model), methods=["hymem"])
    assert [s["turn_ids"] for s in load_summaries(open_workspace(data_dir), "ns").values()] == [["ann-cat", "bob-q1"]]


TOPICS = [[("Ann", "I adopted a grey cat named Pixel last week"), ("Bob", "I ran the Berlin marathon on Sunday"),
           ("Ann", "My sister moved to Porto for a bakery job"), ("Bob", "I am learning to play the cello"),
           ("Ann", "Pixel the cat sleeps on my keyboard"), ("Bob", "The marathon took me four hours")]]
GIST = {"items": [{"text": "Ann adopted a grey cat named Pixel",
                   "turn_ids": ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D1:6"]}]}


def test_an_item_listing_the_whole_session_keeps_its_most_similar_turns(data_dir: str) -> None:
    model = ScriptedChatModel(default=GIST)
    _, reports = ingest(data_dir, model, TOPICS, hymem_turns_per_summary=0, hymem_max_turns_per_item=2)
    summaries = list(load_summaries(open_workspace(data_dir), "ns").values())
    assert summaries[0]["turn_ids"] == ["D1:1", "D1:5"]  # the two cat turns, in conversation order
    # The four turns the cap took away are searchable again as their own turn lines.
    assert [s["turn_ids"] for s in summaries[1:]] == [["D1:2"], ["D1:3"], ["D1:4"], ["D1:6"]]
    assert summaries[1]["text"] == "[D1:2] Bob: I ran the Berlin marathon on Sunday"
    assert any("item 0 listed 6 turns, kept the 2 most similar" in f for f in reports[-1].fallbacks)


def test_link_cap_off_is_the_spec_and_changing_it_relinks_without_a_call(data_dir: str) -> None:
    model = ScriptedChatModel(default=GIST)
    ingest(data_dir, model, TOPICS, hymem_turns_per_summary=0, hymem_max_turns_per_item=0)
    summaries = list(load_summaries(open_workspace(data_dir), "ns").values())
    assert [s["turn_ids"] for s in summaries] == [[f"D1:{k}" for k in range(1, 7)]]
    _, again = ingest(data_dir, model, TOPICS, hymem_turns_per_summary=0, hymem_max_turns_per_item=2)
    assert len(model.calls) == 1 and again[-1].cached_calls == 1  # the reply is reused; only the links change
    ws = open_workspace(data_dir)
    assert len(load_summaries(ws, "ns")) == 5 and ws.index(SUMMARY_KIND, "ns").count() == 5


def test_bounded_summaries_send_a_schema_bounded_by_the_session(data_dir: str) -> None:
    """hymem_bounded_summaries: a grammar made from the schema writes the density check's items, each linked
    to 1 to hymem_max_turns_per_item of the session's own ids; off (the default), the schema is unbounded."""
    sessions = [[("Ann", f"fact number {i}") for i in range(1, 10)]]  # 9 turns: at least 3 items at 4 per item
    on = ScriptedChatModel(default=per_turn_summaries)
    ingest(f"{data_dir}/on", on, sessions, hymem_bounded_summaries=True, hymem_max_turns_per_item=5)
    schema = on.calls[0]["kwargs"]["response_format"]["schema"]
    items = schema["properties"]["items"]
    assert (items["minItems"], items["maxItems"]) == (3, 7)
    ids = items["items"]["properties"]["turn_ids"]
    assert ids["items"]["enum"] == [f"D1:{i}" for i in range(1, 10)]
    assert (ids["minItems"], ids["maxItems"]) == (1, 5)
    assert items["items"]["required"] == ["text", "turn_ids"]
    assert len(load_summaries(open_workspace(f"{data_dir}/on"), "ns")) == 9  # the reply is read as before
    off = ScriptedChatModel(default=per_turn_summaries)
    ingest(f"{data_dir}/off", off, sessions)
    unbounded = off.calls[0]["kwargs"]["response_format"]["schema"]["properties"]["items"]
    assert "minItems" not in unbounded and "enum" not in str(unbounded)


def test_switching_bounded_summaries_on_summarises_again(data_dir: str) -> None:
    model = ScriptedChatModel(default=per_turn_summaries)
    ingest(data_dir, model)
    ingest(data_dir, model)
    assert len(model.calls) == 3
    ingest(data_dir, model, hymem_bounded_summaries=True)
    assert len(model.calls) == 6  # a reply to the unbounded schema is not reused
