"""MGRetrieval ingestion (graphs/mgretrieval/README.md) with a scripted aux model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recollect.dialogue.models import Turn
from recollect.graphs.mgretrieval.memory import settings_fingerprint
from recollect.graphs.mgretrieval.vocabulary import (
    DOC_TURN,
    KeywordVocabulary,
    fallback_keywords,
    grounded_keywords,
    normalise_keyword,
    session_records,
)
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.cache import LLMCache
from recollect.llm.scripted import ScriptedChatModel
from recollect.llm.usage import estimate_tokens
from recollect.memory.workspace import open_workspace
from recollect.prompts import load_prompt
from tests.helpers import make_conversation
from tests.methods.mgretrieval.fakes import ID_LINE, PAIR, FakeAux, call_kind, ingest_scripted

SESSIONS = [
    [("Ann", "I went hiking in the Alps with my sister Clara"), ("Bob", "I bought a red kayak")],
    [("Ann", "Clara loves the Alps too"), ("Bob", "The kayak is red and fast")],
    [("Ann", "Another hike next week"), ("Bob", "I sold the old kayak")],
]
# K_i the fake model "extracts" for each turn id.
KEYWORDS: dict[str, list[str]] = {
    "D1:1": ["Hiking!", "alps", "Clara"],
    "D1:2": ["red kayak"],
    "D2:1": ["clara", "Alps"],
    "D2:2": ["kayak", "red"],
    "D3:1": ["hike", "next week"],
    "D3:2": ["old kayak", "kayak"],
}


def ctx_for(data_dir: str, aux: FakeAux, **kw: Any) -> AllMethodsContext:
    return AllMethodsContext(data_dir=data_dir, **{"chat_model": aux.model, **kw})


def test_normalisation() -> None:
    assert normalise_keyword("  Maya's  Dog! ") == "maya dog"
    assert normalise_keyword("Red-Kayak") == "red kayak"
    assert normalise_keyword(None) == ""


def test_three_sessions_make_three_extraction_calls_and_zero_on_reingest(data_dir: str) -> None:
    """§7.1: 3 extraction calls, ≤3 matching calls (none without candidates), 0 calls on re-ingest."""
    aux = FakeAux(KEYWORDS, {"red": None, "kayak": None})
    ctx = ctx_for(data_dir, aux, mg_match_min_sim=0.6)
    conv = make_conversation(SESSIONS)
    reports = ingest_conversation(conv, "ns", ctx, methods=["mgretrieval"])
    assert aux.count("turns") == 3
    assert aux.count("matches") <= 3
    records = session_records(open_workspace(data_dir), "ns")
    # Session 1 starts from an empty V: nothing can have a shortlist, so no matching call for it.
    assert records[0]["shortlisted"] == 0
    n_match = sum(1 for r in records if r["shortlisted"])
    assert aux.count("matches") == n_match
    assert reports[-1].llm_calls == len(aux.model.calls)

    before = len(aux.model.calls)
    again = ingest_conversation(conv, "ns", ctx, methods=["mgretrieval"])
    assert len(aux.model.calls) == before
    assert again[-1].llm_calls == 0
    assert KeywordVocabulary.load(open_workspace(data_dir), "ns").entries == records_vocab(data_dir)


def records_vocab(data_dir: str) -> list[str]:
    return KeywordVocabulary.replay(session_records(open_workspace(data_dir), "ns")).entries


def test_no_matching_call_when_every_keyword_is_known_or_has_no_shortlist(data_dir: str) -> None:
    kws = {"D1:1": ["alps"], "D1:2": ["kayak"], "D2:1": ["alps"], "D2:2": ["kayak"], "D3:1": ["zebra"], "D3:2": ["alps"]}
    aux = FakeAux(kws)
    ctx = ctx_for(data_dir, aux, mg_match_min_sim=0.99)  # distinct words never reach 0.99 with the hash embedder
    ingest_conversation(make_conversation(SESSIONS), "ns", ctx, methods=["mgretrieval"])
    assert aux.count("turns") == 3
    assert aux.count("matches") == 0
    recs = session_records(open_workspace(data_dir), "ns")
    assert recs[1]["prematched"] == ["alps", "ann", "kayak", "bob"]


def test_vocabulary_after_session_two_does_not_depend_on_session_three(data_dir: str, tmp_path: Any) -> None:
    """§7.2: V and Φ after session 2 are the same with or without session 3 ingested later."""
    conv2 = make_conversation(SESSIONS[:2])
    conv3 = make_conversation(SESSIONS)
    a = FakeAux(KEYWORDS, {"red": "red kayak"})
    ingest_conversation(conv2, "two", ctx_for(data_dir, a, mg_match_min_sim=0.5), methods=["mgretrieval"])
    b = FakeAux(KEYWORDS, {"red": "red kayak"})
    other = str(tmp_path / "other")
    ingest_conversation(conv3, "three", ctx_for(other, b, mg_match_min_sim=0.5), methods=["mgretrieval"])

    only_two = KeywordVocabulary.load(open_workspace(data_dir), "two")
    upto_two = KeywordVocabulary.load(open_workspace(other), "three", upto_session=2)
    assert only_two.entries == upto_two.entries
    assert only_two.phi == upto_two.phi
    full = KeywordVocabulary.load(open_workspace(other), "three")
    assert len(full.entries) > len(upto_two.entries)  # session 3 did add entries

    # Incremental: adding session 3 to "two" afterwards gives the same final structures.
    ingest_conversation(conv3, "two", ctx_for(data_dir, a, mg_match_min_sim=0.5), methods=["mgretrieval"])
    extended = KeywordVocabulary.load(open_workspace(data_dir), "two")
    assert (extended.entries, extended.phi) == (full.entries, full.phi)
    assert a.count("turns") == 3  # only session 3 was extracted the second time


def test_matched_surface_form_is_indexed_under_the_existing_entry(data_dir: str) -> None:
    """§7.3: "hiking" → existing "hike": the turn is indexed under "hike"; "hiking" not in V."""
    sessions = [[("Ann", "We love to hike")], [("Ann", "Hiking today")]]
    aux = FakeAux({"D1:1": ["hike"], "D2:1": ["hiking"]}, {"hiking": "hike"})
    ctx = ctx_for(data_dir, aux, mg_match_min_sim=0.0)
    ingest_conversation(make_conversation(sessions), "ns", ctx, methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert "hiking" not in vocab
    assert vocab.memories("hike") == ["D1:1", "D2:1"]
    turn = open_workspace(data_dir).docs.get("ns", DOC_TURN, "D2:1")
    assert turn["keywords"][0] == "hiking" and turn["terms"][0] == "hike"


def test_keep_surface_forms_indexes_under_both(data_dir: str) -> None:
    sessions = [[("Ann", "We love to hike")], [("Ann", "Hiking today")]]
    aux = FakeAux({"D1:1": ["hike"], "D2:1": ["hiking"]}, {"hiking": "hike"})
    ctx = ctx_for(data_dir, aux, mg_match_min_sim=0.0, mg_keep_surface_forms=True)
    ingest_conversation(make_conversation(sessions), "ns", ctx, methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert vocab.memories("hike") == ["D1:1", "D2:1"]
    assert vocab.memories("hiking") == ["D2:1"]


def test_match_outside_the_shortlist_counts_as_null(data_dir: str) -> None:
    sessions = [[("Ann", "We love to hike")], [("Ann", "Hiking today")]]
    aux = FakeAux({"D1:1": ["hike"], "D2:1": ["hiking"]}, {"hiking": "mountaineering"})
    ctx = ctx_for(data_dir, aux, mg_match_min_sim=0.0)
    ingest_conversation(make_conversation(sessions), "ns", ctx, methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert "hiking" in vocab and "mountaineering" not in vocab
    assert vocab.memories("hike") == ["D1:1"]


def test_malformed_replies_fall_back_safely_and_are_flagged(data_dir: str) -> None:
    """Extraction garbage → deterministic keywords (flagged); matching garbage → all new."""
    model = ScriptedChatModel(default="this is not json at all")
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mg_match_min_sim=0.0)
    reports = ingest_conversation(make_conversation(SESSIONS[:2]), "ns", ctx, methods=["mgretrieval"])
    report = reports[-1]
    assert any("fallback keywords" in f for f in report.fallbacks)
    assert any("match_vocabulary failed" in f for f in report.fallbacks)
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert "clara" in vocab.entries and "alps" in vocab.entries and "kayak" in vocab.entries
    recs = session_records(open_workspace(data_dir), "ns")
    assert recs[0]["fallback_turns"] == ["D1:1", "D1:2"]
    # 2 sessions × (extraction + retry) + session 2's matching (+ retry) = 6 calls, no more.
    assert len(model.calls) == 6


def test_unknown_ids_are_dropped_and_missing_turns_get_fallback(data_dir: str) -> None:
    model = ScriptedChatModel(script=[{"turns": [{"id": "D9:9", "keywords": ["ghost"]}, {"id": "D1:1", "keywords": ["alps"]}]}])
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model)
    ingest_conversation(make_conversation(SESSIONS[:1]), "ns", ctx, methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert "ghost" not in vocab
    assert vocab.memories("alps") == ["D1:1"]
    assert session_records(open_workspace(data_dir), "ns")[0]["fallback_turns"] == ["D1:2"]
    assert "kayak" in vocab.entries  # the fallback extractor found it in D1:2


def test_fallback_keywords() -> None:
    turn = Turn(id="D1:1", speaker="Ann", text="I adopted a beagle called Biscuit at the Riverside shelter", session=1, index=1)
    kws = fallback_keywords(turn)
    assert kws[:3] == ["ann", "biscuit", "riverside"]  # names first, "I" is a stopword
    assert "biscuit" in kws and "riverside" in kws and len(kws) <= 8
    assert "the" not in kws and "at" not in kws


def test_changed_session_replays_from_cache_without_duplicates(data_dir: str) -> None:
    aux = FakeAux(KEYWORDS)
    ctx = ctx_for(data_dir, aux)
    ingest_conversation(make_conversation(SESSIONS[:2]), "ns", ctx, methods=["mgretrieval"])
    changed = [SESSIONS[0], [("Ann", "Clara loves the Alps a lot"), ("Bob", "The kayak is red and fast")]]
    before = aux.count("turns")
    ingest_conversation(make_conversation(changed), "ns", ctx, methods=["mgretrieval"])
    assert aux.count("turns") == before + 1  # only the changed session 2 is extracted again
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert len(vocab.entries) == len(set(vocab.entries))
    assert all(len(v) == len(set(v)) for v in vocab.phi.values())
    ws = open_workspace(data_dir)
    assert ws.index("mg_vocab", "ns").count() == len(vocab.entries)


@pytest.mark.parametrize(("fmt", "line"), [("json", "[D1:1] Ann: I went hiking"), ("compact", "[1] Ann: I went hiking")])
def test_extraction_prompt_lists_turns_with_date(data_dir: str, fmt: str, line: str) -> None:
    aux = FakeAux(KEYWORDS)
    ctx = ctx_for(data_dir, aux, mg_ingest_format=fmt)
    ingest_conversation(make_conversation(SESSIONS[:1]), "ns", ctx, methods=["mgretrieval"])
    prompt = aux.model.prompts()[0]
    assert line in prompt and "1 May, 2023" in prompt
    assert json.loads(json.dumps(aux.model.calls[0]["kwargs"]["response_format"]))["type"] == "json_object"


@pytest.mark.parametrize("reply", [{"turns": {"D1:1": "alps, clara", "D1:2": None}}])
def test_lenient_extraction_shapes(data_dir: str, reply: dict[str, Any]) -> None:
    model = ScriptedChatModel(script=[reply])
    ingest_conversation(make_conversation(SESSIONS[:1]), "ns", AllMethodsContext(data_dir=data_dir, chat_model=model), methods=["mgretrieval"])
    vocab = KeywordVocabulary.load(open_workspace(data_dir), "ns")
    assert vocab.memories("alps") == ["D1:1"] and vocab.memories("clara") == ["D1:1"]


# --- prompt budget and the LLM cache ----------------------------------------------------------------


def test_a_session_over_the_prompt_budget_is_split_into_extraction_calls(data_dir: str) -> None:
    """Room for one turn line per call: every turn is its own extraction call, in order, and each still
    gets the model's keywords (no fallback)."""
    template = estimate_tokens(load_prompt("mgretrieval", "extract_keywords"))
    aux = FakeAux(KEYWORDS)
    ingest_scripted(data_dir, SESSIONS, aux, mg_ingest_format="json", max_prompt_tokens=template + 100 + 1)
    calls = [c for c in aux.model.calls if call_kind(c["kwargs"]) == "turns"]
    assert [ID_LINE.findall(str(c["messages"][-1].content)) for c in calls] == [[t] for t in KEYWORDS]
    turns = open_workspace(data_dir).docs.items("ns", DOC_TURN)
    assert turns["D1:1"]["keywords"][:3] == ["hiking", "alps", "clara"]


def test_matching_candidates_over_the_prompt_budget_are_split_into_calls(data_dir: str) -> None:
    template = estimate_tokens(load_prompt("mgretrieval", "match_vocabulary"))
    aux = FakeAux(KEYWORDS, {"hike": "hiking"})
    # every extraction fits one call; a matching call has room for one candidate line
    ingest_scripted(data_dir, SESSIONS, aux, mg_ingest_format="json", mg_match_min_sim=-1.0,
                    max_prompt_tokens=template + 100 + 1)
    matching = [c for c in aux.model.calls if call_kind(c["kwargs"]) == "matches"]
    listings = [PAIR.findall(str(c["messages"][-1].content)) for c in matching]
    assert len(listings) > 1 and all(len(pairs) == 1 for pairs in listings)
    assert KeywordVocabulary.load(open_workspace(data_dir), "ns").memories("hiking") == ["D1:1", "D3:1"]


def test_a_failed_call_is_asked_again_when_its_session_is_replayed(data_dir: str) -> None:
    """Only valid replies are cached: a session replayed after an earlier one changed asks the model
    again for a call that failed before, instead of keeping its fallback keywords."""
    aux = FakeAux(KEYWORDS)

    def fails_in_session_2(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        if call_kind(kwargs) == "turns" and "2 May" in str(messages[0].content):  # the retry too
            return "not json"
        return aux.reply(messages, kwargs)

    flaky = ScriptedChatModel(default=fails_in_session_2)
    ingest_conversation(make_conversation(SESSIONS[:2]), "ns", ctx_for(data_dir, aux, chat_model=flaky),
                        methods=["mgretrieval"])
    assert session_records(open_workspace(data_dir), "ns")[1]["fallback_turns"] == ["D2:1", "D2:2"]

    changed = [[("Ann", "I went hiking in the Alps with Clara"), SESSIONS[0][1]], SESSIONS[1]]
    ingest_conversation(make_conversation(changed), "ns", ctx_for(data_dir, aux), methods=["mgretrieval"])
    assert aux.count("turns") == 2  # session 1 changed, session 2 failed before: both asked
    assert session_records(open_workspace(data_dir), "ns")[1]["fallback_turns"] == []


def test_replies_cached_in_the_old_format_are_reused(data_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries written before the shared cached call ({"value", "error"}) still answer without a call."""
    monkeypatch.setattr(LLMCache, "put", lambda self, key, value: self.docs.cache_put(
        key, {"value": value["value"], "error": None}))
    aux = FakeAux(KEYWORDS)
    ingest_conversation(make_conversation(SESSIONS[:2]), "ns", ctx_for(data_dir, aux),
                        methods=["mgretrieval"])
    before = aux.count("turns")
    changed = [[("Ann", "I went hiking in the Alps with Clara"), SESSIONS[0][1]], SESSIONS[1]]
    report = ingest_conversation(make_conversation(changed), "ns", ctx_for(data_dir, aux),
                                 methods=["mgretrieval"])[-1]
    assert aux.count("turns") == before + 1  # only the changed session 1; session 2 from the old entry
    assert report.cached_calls >= 1
    assert report.fallbacks == ["replayed from session position 0 (stored sessions changed)"]


def test_grounded_keywords_keep_those_sharing_a_word_with_the_turn_and_top_up() -> None:
    turn = Turn(id="D1:2", speaker="Bob", text="I bought two red kayaks for the lake", session=1, index=2)
    kept, dropped = grounded_keywords(["red kayak", "support group", "lgbtq", "bob", "lake trip"], turn, 3)
    assert kept == ["red kayak", "bob", "lake trip"] and dropped == 2  # plural and prefix both count
    kept, dropped = grounded_keywords(["support group", "courage"], turn, 3)
    assert dropped == 2 and kept == ["bought", "two", "red"]  # the turn's own words, the speaker left out
    assert grounded_keywords(["support group"], turn, 0) == ([], 1)


def test_keyword_grounding_drops_a_neighbour_s_keywords_at_ingest(data_dir: str) -> None:
    """The fake model repeats turn 1's keywords for turn 2 (what the 1.5B model did): with the setting on,
    turn 2 keeps none of them and is filed under its own words; off (the spec), it is filed under them."""
    copied = {"D1:1": ["hiking", "alps", "clara"], "D1:2": ["hiking", "alps", "clara"]}
    for grounding, data in ((False, f"{data_dir}/off"), (True, f"{data_dir}/on")):
        aux = FakeAux(copied)
        ctx = ctx_for(data, aux, mg_keyword_grounding=grounding)
        ingest_conversation(make_conversation(SESSIONS[:1]), "ns", ctx, methods=["mgretrieval"])
        vocab = KeywordVocabulary.load(open_workspace(data), "ns")
        record = session_records(open_workspace(data), "ns")[0]
        if grounding:
            assert vocab.memories("alps") == ["D1:1"] and "D1:2" in vocab.memories("kayak")
            assert {"ungrounded_keywords_dropped": 3} in record["notes"] and not record["fallback_turns"]
        else:
            assert vocab.memories("alps") == ["D1:1", "D1:2"] and "kayak" not in vocab.entries


def test_keyword_grounding_is_part_of_the_chain_only_when_on() -> None:
    base = AllMethodsContext()
    off = settings_fingerprint(base, None, "e")
    assert settings_fingerprint(AllMethodsContext(mg_keyword_grounding=False, mg_grounded_minimum=5), None, "e") == off
    assert settings_fingerprint(AllMethodsContext(mg_keyword_grounding=True), None, "e") != off
