"""MGRetrieval's compact ingestion format (`mg_ingest_format`, issue 12): the same V, Φ and T_i as the
json format from equivalent replies, lenient about the reply's shape, and fewer generated tokens."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from recollect.dialogue.models import Turn
from recollect.graphs.mgretrieval.ingest_replies import (
    ExtractionReply,
    MatchReply,
    compact_extraction_model,
    compact_match_model,
    resolve_entry,
    resolve_turn,
)
from recollect.graphs.mgretrieval.memory import settings_fingerprint
from recollect.graphs.mgretrieval.vocabulary import DOC_TURN, KeywordVocabulary, session_records
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation
from tests.methods.mgretrieval.fakes import FakeAux, call_kind, schema_of
from tests.methods.mgretrieval.test_ingest import KEYWORDS, SESSIONS

# Every keyword of a later session is shortlisted against all of V, so matches do not depend on the
# test embedder's similarities.
OPEN_SHORTLIST: dict[str, Any] = {"mg_match_min_sim": -1.0, "mg_match_shortlist": 50}
MATCHES: dict[str, str | None] = {"hike": "hiking", "red": "red kayak", "old kayak": "kayak"}
CANDIDATE_LINE = re.compile(r"^(\d+)\. (.+?) -> (.+)$", re.M)


def built(data_dir: str, ns: str = "ns") -> dict[str, Any]:
    """Everything ingestion stored that defines the memory: V (in order), Φ and every turn's K_i / T_i."""
    ws = open_workspace(data_dir)
    vocab = KeywordVocabulary.load(ws, ns)
    turns = ws.docs.items(ns, DOC_TURN)
    return {
        "entries": vocab.entries,
        "phi": vocab.phi,
        "turns": {tid: (d["keywords"], d["terms"], d["fallback"]) for tid, d in sorted(turns.items())},
        "matched": [r["matched"] for r in session_records(ws, ns)],
    }


def ingest(data_dir: str, aux: FakeAux, fmt: str, sessions: list[list[tuple[str, str]]] = SESSIONS, **kw: Any) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=aux.model, mg_ingest_format=fmt, **{**OPEN_SHORTLIST, **kw})
    ingest_conversation(make_conversation(sessions), "ns", ctx, methods=["mgretrieval"])


@pytest.mark.parametrize("shape", ["auto", "json"])
def test_compact_replies_build_the_same_memory_as_json_replies(tmp_path: Any, shape: str) -> None:
    """Equivalent replies → identical V, Φ and T_i; `shape="json"` is a model answering the compact
    request in the old keyed shape, which is parsed all the same."""
    as_json = FakeAux(KEYWORDS, MATCHES)
    ingest(str(tmp_path / "json"), as_json, "json")
    compact = FakeAux(KEYWORDS, MATCHES, shape=shape)
    ingest(str(tmp_path / "compact"), compact, "compact")

    expected = built(str(tmp_path / "json"))
    assert built(str(tmp_path / "compact")) == expected
    # The matching call really ran and mapped keywords onto existing entries.
    assert {"hike": "hiking", "old kayak": "kayak"}.items() <= expected["matched"][2].items()
    assert expected["matched"][1] == {"red": "red kayak"}
    # Each run asked in its own format (compact schemas are titled, the json ones are not).
    assert {schema_of(c["kwargs"]).get("title") for c in compact.model.calls} == {"MGKeywords", "MGMatches"}
    assert {schema_of(c["kwargs"]).get("title") for c in as_json.model.calls} == {"ExtractionReply", "MatchReply"}
    assert compact.count("turns") == as_json.count("turns") == 3
    assert compact.count("matches") == as_json.count("matches") == 2


def test_compact_prompts_number_turns_and_entries(data_dir: str) -> None:
    aux = FakeAux(KEYWORDS, MATCHES)
    ingest(data_dir, aux, "compact", SESSIONS[:2])
    extract, match = aux.model.prompts()[0], aux.model.prompts()[2]
    assert "[1] Ann: I went hiking" in extract and "[2] Bob: I bought a red kayak" in extract and "D1:1" not in extract
    # Static first: the instructions come before the session's data, so calls share a prompt prefix.
    assert extract.index("Reply with") < extract.index("1 May, 2023") < extract.index("[1] Ann")
    assert match.index("Reply with") < match.index("1. ")
    lines = CANDIDATE_LINE.findall(match)
    assert lines and all(re.fullmatch(r"1\) [^,]+(, \d+\) [^,]+)*", entries) for _, _, entries in lines)
    # The schema sent fixes the keys: every turn number once, every candidate once with its range.
    sent = schema_of(aux.model.calls[0]["kwargs"])
    assert sent["required"] == ["1", "2"] and sent["additionalProperties"] is False
    msent = schema_of(aux.model.calls[2]["kwargs"])
    assert msent["required"] == [str(i) for i in range(1, len(lines) + 1)]
    assert all(p["minimum"] == 0 and p["maximum"] == len(entries.split(", ")) for p, (_, _, entries) in
               zip(msent["properties"].values(), lines, strict=True))


def test_compact_schemas_are_capped() -> None:
    ext = compact_extraction_model(3, 8).model_json_schema()
    assert list(ext["properties"]) == ["1", "2", "3"] and ext["required"] == ["1", "2", "3"]
    assert all(p == {"type": "string", "maxLength": 8 * 24} for p in ext["properties"].values())
    assert compact_extraction_model(3, 8) is compact_extraction_model(3, 8)  # one class per shape
    mat = compact_match_model((2, 5)).model_json_schema()
    assert mat["properties"] == {"1": {"type": "integer", "minimum": 0, "maximum": 2},
                                 "2": {"type": "integer", "minimum": 0, "maximum": 5}}
    # The json format's schemas are untouched.
    assert set(ExtractionReply.model_json_schema()["properties"]) == {"turns"}
    assert set(MatchReply.model_json_schema()["properties"]) == {"matches"}


@pytest.mark.parametrize("reply", [
    {"1": "Alps, clara", "2": "kayak"},
    {"1": ["Alps", "clara"], "2": ["kayak"]},
    {"turns": [{"id": "1", "keywords": ["Alps", "clara"]}, {"id": "[2]", "keywords": "kayak"}]},
    {"turns": {"1": "Alps; clara", "2": ["kayak"]}},
    [["Alps", "clara"], ["kayak"]],
    [{"1": "Alps, clara"}, {"2": "kayak"}],
    {"keywords": [["Alps", "clara"], ["kayak"]]},
])
def test_extraction_reply_shapes(reply: Any) -> None:
    """Every shape a small model tends to produce parses to the same items, in either format's model."""
    want = {"turns": [{"id": "1", "keywords": ["Alps", "clara"]}, {"id": "2", "keywords": ["kayak"]}]}
    assert compact_extraction_model(2, 8).model_validate(reply).model_dump() == want
    assert ExtractionReply.model_validate(reply).model_dump() == want


@pytest.mark.parametrize("reply", [
    {"1": 2, "2": 0},
    {"1": "2", "2": None},
    {"1": [2], "2": "new"},
    [[1, 2], [2, 0]],
    {"matches": [[1, 2], [2, 0]]},
    {"pairs": [[1, 2], [2]]},
    {"matches": [{"keyword": 1, "entry": 2}, {"keyword": "2", "entry": None}]},
    [{"1": 2}, {"2": 0}],
])
def test_match_reply_shapes(reply: Any) -> None:
    want = {"matches": [{"keyword": "1", "entry": "2"}, {"keyword": "2", "entry": None}]}
    assert compact_match_model((3, 3)).model_validate(reply).model_dump() == want
    assert MatchReply.model_validate(reply).model_dump() == want


@pytest.mark.parametrize("reply", [{"answer": "Pixel"}, {"keywords": ["alps", "clara"]}, {}])
def test_unwrapped_objects_without_numbers_stay_invalid(reply: Any) -> None:
    """Not a reply to either call: validation fails, so `call_structured` retries as before."""
    for model in (compact_extraction_model(2, 8), ExtractionReply, compact_match_model((2,)), MatchReply):
        with pytest.raises(ValidationError):
            model.model_validate(reply)


def test_resolve_entry() -> None:
    short = ["hike", "trail walk"]
    assert resolve_entry("2", short, numbers_first=True) == ("trail walk", None)
    assert resolve_entry(None, short, numbers_first=True) == (None, None)
    assert resolve_entry("3", short, numbers_first=True) == (None, "entry number out of range")
    assert resolve_entry("Trail-Walk", short, numbers_first=True) == ("trail walk", None)
    assert resolve_entry("mountaineering", short, numbers_first=True) == (None, "not in the keyword's shortlist")
    assert resolve_entry("hike", short, numbers_first=False) == ("hike", None)


def test_resolve_turn_numbers_first_only_in_compact() -> None:
    # A dataset whose turn ids are bare numbers: "1" is the first listed turn in compact, the id in json.
    batch = [Turn(id=i, speaker="Ann", text="x", session=1, index=n) for n, i in enumerate(["2", "1"], 1)]
    assert resolve_turn("1", batch, numbers_first=True) == "2"
    assert resolve_turn("1", batch, numbers_first=False) == "1"
    assert resolve_turn("3", batch, numbers_first=True) is None
    assert resolve_turn("D9:9", batch, numbers_first=True) is None


def _entry_number(prompt: str, keyword: str, entry: str) -> tuple[int, int]:
    """(candidate number, entry number) of `keyword` → `entry` in a compact matching prompt."""
    for num, kw, entries in CANDIDATE_LINE.findall(prompt):
        if kw == keyword:
            listed = dict((e, int(j)) for j, e in re.findall(r"(\d+)\) ([^,]+)", entries))
            return int(num), listed[entry]
    raise AssertionError(f"{keyword} not listed")


def test_entry_numbers_out_of_range_count_as_null(data_dir: str) -> None:
    """Pairs [candidate, entry]: an entry number past the shortlist is null (the keyword is new) and
    noted; a candidate number past the listing names nothing; a valid pair maps the keyword."""
    sessions = [[("Ann", "We love to hike")], [("Ann", "Hiking today with the dog")]]

    def match(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        prompt = str(messages[0].content)
        hiking = _entry_number(prompt, "hiking", "hike")
        dog, _ = _entry_number(prompt, "dog", "hike")
        return [list(hiking), [dog, 9], [7, 1]]

    model = ScriptedChatModel(script=[{"1": "hike"}, {"1": "hiking, dog"}, match])
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mg_ingest_format="compact", **OPEN_SHORTLIST)
    ingest_conversation(make_conversation(sessions), "ns", ctx, methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert vocab.memories("hike") == ["D1:1", "D2:1"] and "hiking" not in vocab
    assert vocab.memories("dog") == ["D2:1"]
    rec = session_records(open_workspace(data_dir), "ns")[1]
    assert rec["matched"] == {"hiking": "hike"}
    assert {"rejected_match": ["dog", "9"], "why": "entry number out of range"} in rec["notes"]
    assert call_kind(model.calls[2]["kwargs"]) == "matches"


def test_unknown_ids_are_dropped_in_compact_mode(data_dir: str) -> None:
    """Turn numbers past the batch and ids of no listed turn are dropped; the turn left without
    keywords gets the flagged fallback; an id of a listed turn (old shape) is still understood."""
    model = ScriptedChatModel(script=[{"1": "alps", "7": "ghost", "D9:9": "phantom"},
                                      {"turns": [{"id": "D2:2", "keywords": ["kayak"]}, {"id": "1", "keywords": "clara"}]}])
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mg_ingest_format="compact", mg_match_min_sim=0.99)
    ingest_conversation(make_conversation(SESSIONS[:2]), "ns", ctx, methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert "ghost" not in vocab and "phantom" not in vocab
    assert vocab.memories("alps") == ["D1:1"]
    recs = session_records(open_workspace(data_dir), "ns")
    assert recs[0]["fallback_turns"] == ["D1:2"] and "kayak" in vocab  # the fallback found "kayak"
    assert recs[1]["fallback_turns"] == []
    assert vocab.memories("clara") == ["D2:1"]


def test_formats_never_share_cached_replies(data_dir: str) -> None:
    """The cache key and the chain hash include the format: switching asks again; switching back is free."""
    aux = FakeAux(KEYWORDS, MATCHES)
    ingest(data_dir, aux, "json")
    json_calls = len(aux.model.calls)
    json_memory = built(data_dir)
    ingest(data_dir, aux, "compact")
    assert aux.count("turns") == 6  # every session extracted again, in the compact format
    assert built(data_dir) == json_memory
    before = len(aux.model.calls)
    ingest(data_dir, aux, "compact")
    ingest(data_dir, aux, "json")  # a replay from the json cache
    assert len(aux.model.calls) == before and before == 2 * json_calls
    assert built(data_dir) == json_memory
    fp = {f: settings_fingerprint(AllMethodsContext(mg_ingest_format=f), aux.model, "e") for f in ("json", "compact")}
    assert fp["json"] != fp["compact"]


# A session the size and style of a LoCoMo one (12 turns), with 1–3 word keywords, 4–8 a turn.
LONG_SESSIONS = [
    [("Ann", "Hey Bob! I started volunteering at the animal shelter downtown last Saturday."),
     ("Bob", "That's great, Ann. I finally finished painting the mural at the community center."),
     ("Ann", "Wow, what did you paint? I adopted a beagle puppy named Biscuit from the shelter."),
     ("Bob", "A sunset over the lake with kids flying kites. Biscuit is a lovely name for a beagle."),
     ("Ann", "Thanks! My sister Clara is visiting from Boston next week to meet him."),
     ("Bob", "Nice. I am training for the city marathon in October with my running club."),
     ("Ann", "How far do you run each week? I only jog around the park with Biscuit."),
     ("Bob", "About forty miles. My coach says I should try yoga for my knees."),
     ("Ann", "Clara teaches yoga at a studio in Boston, she could give you tips."),
     ("Bob", "I would love that. Maybe we can all go hiking in the Blue Ridge mountains."),
     ("Ann", "Biscuit would love a hike, but he is still too small for long trails."),
     ("Bob", "Then let's plan it for the spring, after the marathon.")],
    [("Ann", "Bob, Biscuit graduated from puppy training class today!"),
     ("Bob", "Congrats! I ran the marathon in three hours and forty minutes."),
     ("Ann", "That's amazing. Clara says the yoga studio has a beginner class on Tuesdays."),
     ("Bob", "My knees feel better since I joined the running club's stretching sessions."),
     ("Ann", "We should book the Blue Ridge cabin for the hiking trip in April."),
     ("Bob", "Sounds good, I will bring my new trail shoes and the camping stove.")],
]
LONG_KEYWORDS: dict[str, list[str]] = {
    "D1:1": ["bob", "volunteering", "animal shelter", "downtown", "last saturday"],
    "D1:2": ["ann", "painting", "mural", "community center"],
    "D1:3": ["painting", "adopted", "beagle puppy", "biscuit", "animal shelter"],
    "D1:4": ["sunset painting", "lake", "kids", "flying kites", "biscuit", "beagle"],
    "D1:5": ["sister", "clara", "boston", "next week", "visit", "biscuit"],
    "D1:6": ["training", "city marathon", "october", "running club"],
    "D1:7": ["running distance", "jogging", "park", "biscuit"],
    "D1:8": ["forty miles", "running coach", "yoga", "knees"],
    "D1:9": ["clara", "yoga teacher", "yoga studio", "boston", "tips"],
    "D1:10": ["hiking trip", "blue ridge mountains", "group outing"],
    "D1:11": ["biscuit", "hiking", "small dog", "long trails"],
    "D1:12": ["spring", "hiking plan", "after the marathon"],
    "D2:1": ["biscuit", "graduation", "puppy training class", "today"],
    "D2:2": ["city marathon", "marathon time", "three hours forty minutes"],
    "D2:3": ["clara", "yoga studio", "beginner class", "tuesdays"],
    "D2:4": ["knee pain", "running club", "stretching sessions"],
    "D2:5": ["blue ridge cabin", "booking", "hiking trip", "april"],
    "D2:6": ["trail shoes", "camping stove", "hiking trip"],
}
LONG_MATCHES: dict[str, str | None] = {"marathon time": "city marathon", "knee pain": "knees", "puppy training class": "training"}


def test_compact_replies_are_at_least_30_percent_fewer_tokens(tmp_path: Any) -> None:
    """Same content, both formats: completion tokens as ingestion counts them (the API reports none
    here, so `estimate_tokens` of each reply), per call kind and in total."""
    tokens: dict[str, dict[str, int]] = {}
    memory: dict[str, Any] = {}
    for fmt in ("json", "compact"):
        aux = FakeAux(LONG_KEYWORDS, LONG_MATCHES)
        aux.model.with_usage = False  # usage from estimate_tokens(reply), as for an endpoint without usage
        ingest(str(tmp_path / fmt), aux, fmt, LONG_SESSIONS, mg_match_shortlist=5)
        by_node: dict[str, int] = {}
        for rec in session_records(open_workspace(str(tmp_path / fmt)), "ns"):
            for node, counters in rec["usage"]["by_node"].items():
                by_node[node] = by_node.get(node, 0) + counters["completion_tokens"]
        tokens[fmt] = by_node
        memory[fmt] = built(str(tmp_path / fmt))
    assert memory["compact"] == memory["json"]  # the saving changes nothing in the memory
    assert memory["json"]["matched"][1]  # and the matching call did map keywords
    report = json.dumps(tokens)
    for node in ("mg_extract_keywords", "mg_match_vocabulary"):
        assert tokens["compact"][node] <= 0.7 * tokens["json"][node], report
    assert sum(tokens["compact"].values()) <= 0.7 * sum(tokens["json"].values()), report
