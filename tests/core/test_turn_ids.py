"""The shared turn-id matcher (app/turn_ids.py): ids of any shape, cited in replies or free text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recollect.dialogue.turn_ids import TurnIdMatcher, _alternation, id_items
from recollect.steps import AnswerReply, clean_answer, is_no_info

KNOWN = ["D1:1", "D1:10", "bob-q1", "bob-q1-2", "T7", "a", "intro"]


def test_find_matches_known_ids_only_and_never_inside_a_longer_id() -> None:
    m = TurnIdMatcher(KNOWN)
    text = "[D1:10] and D1:1. Also bob-q1, not bob-q1x, D1:1-3, D1:100 or D9:9; [a] but not a cat; [intro]"
    assert m.find(text) == ["D1:10", "D1:1", "bob-q1", "a", "intro"]
    assert m.find(["BOB-Q1-2 said", "t7"]) == ["bob-q1-2"]  # bare ids need 3+ characters: "T7" only in brackets
    assert m.find("[t7] and bob-q1-2") == ["T7", "bob-q1-2"]


def test_resolve_takes_exact_ids_case_insensitively_then_ids_inside_an_item() -> None:
    m = TurnIdMatcher(KNOWN)
    assert m.resolve(["[D1:1]", "BOB-Q1", "a", "see D1:10 and [intro]", "D9:9", "nothing"]) == [
        "D1:1", "bob-q1", "a", "D1:10", "intro"]
    assert TurnIdMatcher([]).resolve(["D1:1"]) == [] and TurnIdMatcher([]).find("D1:1") == []


@pytest.mark.parametrize(("value", "expected"), [
    (None, []),
    ("D1:1, [bob-q1]; 'x-2'", ["D1:1", "bob-q1", "x-2"]),
    (["[D1:1]", " D2:3 ", None, {"id": 1}, "see D3:4 and D3:5"], ["D1:1", "D2:3", "D3:4", "D3:5"]),
    (7, ["7"]),
])
def test_id_items_cleans_reply_values(value: object, expected: list[str]) -> None:
    assert id_items(value) == expected
    assert AnswerReply.model_validate({"answer": "x", "supports": value}).supports == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("Pixel", "Pixel"), ('{"answer": "Pixel", "supports": []}', "Pixel"), ('{"answer": ""}', ""),
    ('{"supports": ["D1:1"]}', ""), ("[1, 2]", ""), ('```json\n{"answer": "Oslo"}\n```', "Oslo"),
    ('{"answer": "{\\"answer\\": \\"x\\"}"}', ""), ("{not json at all", ""),
])
def test_clean_answer_never_returns_json(raw: str, expected: str) -> None:
    assert clean_answer(raw) == expected


def test_no_info_forms() -> None:
    assert all(is_no_info(t) for t in ["", "  ", "No information available.", "unknown", "None",
                                        "No information available in the memories"])
    assert not any(is_no_info(t) for t in ["Pixel", "no", "Unknown Pleasures (the album)"])


# --- the token scan finds what the one-pattern alternation found ---------------------------------------------
_ID = st.text(alphabet="Db1:2-3._ x[]", min_size=1, max_size=6)
_TEXT = st.lists(st.one_of(st.sampled_from(["D1:3", "D1:30", "[D1:3]", "[ b-2 ]", "x.D1:3", "D1:3.", "a-D1:3",
                                            "..D1:3", "D1:3-a", "(D1:3)", "[see D1:3]", "b-2", "B-2", " ", ", "]),
                                 st.text(alphabet="Db1:2-3._ x[]", max_size=5)), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(_ID, max_size=6), _TEXT)
def test_the_token_scan_agrees_with_the_alternation(known: list[str], text: str) -> None:
    matcher = TurnIdMatcher(known)
    pattern = _alternation(list(matcher.known.values()))
    expected: dict[str, None] = {}
    for m in pattern.finditer(text) if pattern is not None else []:
        expected.setdefault(matcher.known[(m.group("b") or m.group("w")).lower()], None)
    assert matcher.find(text) == list(expected)
