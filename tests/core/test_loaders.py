"""Loader tests: LoCoMo quirks (synthetic fixture), the simple format, and error messages for bad input."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from recollect.dialogue.loaders import (
    load_conversation,
    load_dialogues,
    parse_locomo_datetime,
    parse_session_datetime,
)
from recollect.dialogue.models import DialogueError
from recollect.eval.questions import load_questions, parse_evidence

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUIRKS = FIXTURES / "locomo_quirks.json"
DEV = Path("/work/shared/data/locomo/locomo_dev.json")


def write(tmp_path: Path, data: Any, name: str = "dialogue.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- LoCoMo


def test_locomo_sessions_sorted_by_integer_and_dangling_keys_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        convs = load_dialogues(QUIRKS)
    assert [c.id for c in convs] == ["conv-q1", "conv-q2"]
    q1 = convs[0]
    assert q1.speakers == ("Ann", "Ben")
    # session_3 is an empty list and session_11 only has a date key: neither becomes a session.
    assert [s.index for s in q1.sessions] == [1, 2, 10]
    assert q1.sessions[2].turns[0].id == "D10:1"
    assert set(q1.extra) >= {"event_summary", "observation", "session_summary", "qa"}
    assert q1.source == str(QUIRKS)


def test_locomo_turn_fields_and_captions() -> None:
    turns = load_conversation(QUIRKS, "conv-q1").turn_map()
    caption_only = turns["D1:2"]  # caption but no img_url: still an image share
    assert caption_only.caption == "a photo of a mountain trail"
    assert caption_only.img_urls == ()
    assert caption_only.full_text.endswith("[shared image: a photo of a mountain trail]")
    both = turns["D2:2"]  # empty text is fine when a caption is present
    assert both.text == "" and both.caption == "a cat asleep on a laptop"
    assert both.img_urls == ("https://example.invalid/cat.jpg",)
    url_only = turns["D2:3"]  # img_url without caption is not the signal
    assert url_only.caption is None and url_only.img_urls
    assert (both.session, both.index) == (2, 2)
    assert both.date_time == "12:05 am on 9 May, 2023"


def test_locomo_dates(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        convs = load_dialogues(QUIRKS)
    q1, q2 = convs
    assert q1.sessions[0].parsed == datetime(2023, 5, 8, 13, 56)
    assert q1.sessions[1].parsed == datetime(2023, 5, 9, 0, 5)  # 12:xx am is 00:xx
    assert q2.sessions[1].parsed is None and q2.sessions[1].date_time == "sometime in spring"
    assert any("sometime in spring" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:28 am on 8 November, 2023", datetime(2023, 11, 8, 0, 28)),
        ("12:00 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 0)),
        ("11:59 pm on 31 December, 2023", datetime(2023, 12, 31, 23, 59)),
        ("01:56 pm on 8 May, 2023", None),  # leading zero on the hour
        ("1:5 pm on 8 May, 2023", None),
        ("13:56 pm on 8 May, 2023", None),
        ("1:56 pm on 08 May, 2023", None),
        ("1:56 pm on 8 Mayo, 2023", None),
        ("1:56 pm on 31 February, 2023", None),
        ("1:56 PM on 8 May, 2023", None),
        ("", None),
    ],
)
def test_strict_locomo_datetime(text: str, expected: datetime | None) -> None:
    assert parse_locomo_datetime(text) == expected


def test_iso_only_for_simple_format() -> None:
    assert parse_session_datetime("2023-05-08T13:56") is None
    assert parse_session_datetime("2023-05-08T13:56", allow_iso=True) == datetime(2023, 5, 8, 13, 56)
    assert parse_session_datetime("2023-05-08T13:56+02:00", allow_iso=True) == datetime(2023, 5, 8, 13, 56)


def test_locomo_questions_quirks() -> None:
    qs = {q.id: q for q in load_questions(QUIRKS)}
    assert len(qs) == 16  # the loader keeps every item, duplicates included
    q = qs["conv-q1#0"]  # Q1: integer gold
    assert q.gold_raw == 2022 and q.gold == "2022"
    assert qs["conv-q1#1"].gold == "3"
    adv = qs["conv-q1#8"]  # Q2: both keys; gold is adversarial_answer, stray answer kept as extra
    assert adv.gold == "Yes" and adv.extra == {"answer": "No"} and adv.category_name == "adversarial"
    assert qs["conv-q1#9"].gold == "hiking"
    assert qs["conv-q1#5"].gold.startswith("Likely yes; ")  # Q8: raw gold kept, cut only by the scorer
    dup = qs["conv-q1#10"]  # Q3: duplicates survive loading with their own position
    assert dup.question == qs["conv-q1#2"].question and dup.is_duplicate_of is None


@pytest.mark.parametrize(
    ("qid", "ids", "dropped"),
    [
        ("conv-q1#1", ("D1:3", "D2:1"), ()),  # "D8:6; D9:17" form
        ("conv-q1#2", ("D1:1",), ("D",)),  # bare "D"
        ("conv-q1#3", ("D10:2",), ()),  # "D:11:26" form
        ("conv-q1#4", ("D10:1",), ()),  # "D30:05" form: leading zero removed
        ("conv-q1#5", ("D1:1", "D2:2", "D1:2"), ()),  # space-joined list
        ("conv-q1#6", (), ("D2:9",)),  # no such turn
        ("conv-q1#7", (), ()),  # empty evidence list
        ("conv-q2#2", ("D2:1",), ()),  # repeated id collapses
    ],
)
def test_evidence_parsing(qid: str, ids: tuple[str, ...], dropped: tuple[str, ...]) -> None:
    q = {q.id: q for q in load_questions(QUIRKS)}[qid]
    assert q.evidence_ids == ids
    assert q.evidence_dropped == dropped


def test_observation_slots_normalise() -> None:
    conv = load_conversation(QUIRKS, "conv-q1")
    facts = conv.extra["observation"]["session_1_observation"]["Ann"]
    valid = conv.turn_map().keys()
    assert [parse_evidence(slot, valid)[0] for _, slot in facts] == [
        ["D1:1"],
        ["D1:3", "D1:1"],
        ["D1:1", "D2:1", "D10:2"],
    ]
    assert parse_evidence("D:7:03, x") == (["D7:3"], ["x"])


def test_load_conversation_needs_id_when_several() -> None:
    with pytest.raises(DialogueError) as exc:
        load_conversation(QUIRKS)
    assert "conv-q1" in str(exc.value) and "conv-q2" in str(exc.value)
    with pytest.raises(DialogueError, match="conv-zz"):
        load_conversation(QUIRKS, "conv-zz")


@pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo dev split not present")
def test_dev_split_shape() -> None:
    convs = load_dialogues(DEV)
    assert [c.id for c in convs] == ["conv-26", "conv-30"]
    assert [len(c.turns) for c in convs] == [419, 369]
    assert [len(c.sessions) for c in convs] == [19, 19]
    assert [sum(t.caption is not None for t in c.turns) for c in convs] == [116, 72]


def _locomo_sample(**turn_overrides: Any) -> list[dict[str, Any]]:
    turn = {"speaker": "Ann", "dia_id": "D1:1", "text": "hi"} | turn_overrides
    turn = {k: v for k, v in turn.items() if v is not None}
    return [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Ben",
                "session_1_date_time": "1:00 pm on 1 May, 2023",
                "session_1": [{"speaker": "Ben", "dia_id": "D1:0", "text": "yo"}, turn],
            },
            "qa": [],
        }
    ]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"speaker": None}, "speaker"),
        ({"text": None}, "text"),
        ({"text": "  "}, "text"),
        ({"dia_id": "D1:0"}, "dia_id"),
    ],
)
def test_locomo_bad_turns_name_file_record_field(
    tmp_path: Path, overrides: dict[str, Any], field: str
) -> None:
    path = write(tmp_path, _locomo_sample(**overrides))
    with pytest.raises(DialogueError) as exc:
        load_dialogues(path)
    msg = str(exc.value)
    assert str(path) in msg and "conv-x session_1[1]" in msg and field in msg


def test_locomo_non_list_session(tmp_path: Path) -> None:
    data = _locomo_sample()
    data[0]["conversation"]["session_2"] = {"oops": 1}
    path = write(tmp_path, data)
    with pytest.raises(DialogueError, match=r"conv-x session_2: turns must be a list"):
        load_dialogues(path)


# --------------------------------------------------------------------------------------------- simple format


SIMPLE = {
    "id": "alice-bob",
    "speakers": ["Alice", "Bob"],
    "sessions": [
        {
            "date_time": "1:56 pm on 8 May, 2023",
            "turns": [
                {"speaker": "Alice", "text": "I adopted a cat."},
                {"speaker": "Bob", "text": "", "image_caption": "a kitten"},
            ],
        },
        {"date_time": "2023-05-20T09:30", "turns": [{"speaker": "Bob", "text": "How is she?", "id": "b1"}]},
    ],
    "note": "kept",
}


def test_simple_format_single(tmp_path: Path) -> None:
    conv = load_conversation(write(tmp_path, SIMPLE))
    assert conv.id == "alice-bob" and conv.speakers == ("Alice", "Bob")
    assert [t.id for t in conv.turns] == ["D1:1", "D1:2", "b1"]
    assert conv.sessions[0].parsed == datetime(2023, 5, 8, 13, 56)
    assert conv.sessions[1].parsed == datetime(2023, 5, 20, 9, 30)
    kitten = conv.turns[1]
    assert kitten.caption == "a kitten" and kitten.full_text == "[shared image: a kitten]"
    assert conv.turns[2].date_time == "2023-05-20T09:30" and conv.turns[2].session == 2
    assert conv.extra["note"] == "kept"


def test_simple_format_list_and_defaults(tmp_path: Path) -> None:
    second = {"sessions": [{"turns": [{"speaker": "Cy", "text": "one"}, {"speaker": "Di", "text": "two"}]}]}
    path = write(tmp_path, [SIMPLE, second], name="chats.json")
    convs = load_dialogues(path)
    assert [c.id for c in convs] == ["alice-bob", "chats-2"]
    assert convs[1].speakers == ("Cy", "Di")  # order of first appearance
    assert convs[1].sessions[0].date_time == "" and convs[1].sessions[0].parsed is None
    with pytest.raises(DialogueError, match="alice-bob, chats-2"):
        load_conversation(path)
    assert load_conversation(path, "chats-2").id == "chats-2"


def _bad_turn(**turn: Any) -> dict[str, Any]:
    good = {"speaker": "Alice", "text": "fine"}
    return {"sessions": [{"turns": [good]}, {"turns": [good]}, {"turns": [good, good, good, good, turn]}]}


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        (_bad_turn(speaker="Alice"), ["sessions[2].turns[4].text"]),
        (_bad_turn(speaker="Alice", text=""), ["sessions[2].turns[4].text"]),
        (_bad_turn(text="hello"), ["sessions[2].turns[4].speaker"]),
        (_bad_turn(speaker="Alice", text="x", id="D1:1"), ["sessions[2].turns[4].id", "duplicate", "'D1:1'"]),
        ({"sessions": [{"turns": "nope"}]}, ["sessions[0].turns", "not a list"]),
        ({"sessions": [{"date_time": 5, "turns": []}]}, ["sessions[0].date_time"]),
        ({"sessions": []}, ["sessions", "non-empty list"]),
        (
            {"speakers": ["Bob"], "sessions": [{"turns": [{"speaker": "Eve", "text": "x"}]}]},
            ["turns[0].speaker", "Eve"],
        ),
        ([SIMPLE, {"sessions": [{"turns": [{"text": "x"}]}]}], ["[1].sessions[0].turns[0].speaker"]),
        ([SIMPLE, SIMPLE], ["alice-bob", "more than once"]),
        ([], ["no conversations"]),
        ("42", ["top level", "int"]),
        ('"text"', ["top level", "str"]),
    ],
)
def test_simple_bad_input(tmp_path: Path, data: Any, needles: list[str]) -> None:
    path = write(tmp_path, data)
    with pytest.raises(DialogueError) as exc:
        load_dialogues(path)
    msg = str(exc.value)
    assert str(path) in msg
    for needle in needles:
        assert needle in msg


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(DialogueError, match=r"nope\.json: dialogue file not found"):
        load_dialogues(missing)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "sessions": [\n    {"turns": [}\n  ]\n}')
    with pytest.raises(DialogueError) as exc:
        load_dialogues(path)
    assert str(path) in str(exc.value) and "line 3, column" in str(exc.value)


def test_dialogue_error_is_value_error() -> None:
    assert issubclass(DialogueError, ValueError)


def test_locomo_sample_without_conversation(tmp_path: Path) -> None:
    data = _locomo_sample()
    data.append({"sample_id": "conv-y", "qa": []})
    path = write(tmp_path, data)
    with pytest.raises(DialogueError) as exc:
        load_dialogues(path)
    assert str(path) in str(exc.value) and "conv-y" in str(exc.value) and "'conversation'" in str(exc.value)


def test_locomo_missing_sample_id(tmp_path: Path) -> None:
    data = _locomo_sample()
    del data[0]["sample_id"]
    path = write(tmp_path, data)
    with pytest.raises(DialogueError, match=r"\[0\]: field 'sample_id'"):
        load_dialogues(path)


def test_brackets_and_escapes_inside_text_do_not_count_as_nesting(tmp_path: Path) -> None:
    from recollect.dialogue.json_input import MAX_DEPTH, json_depth

    text = '[[ {"quote \\" [": "' + "[{" * 500 + '\\\\"}]'
    assert json_depth(text) == 3
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    assert json_depth(deep) == MAX_DEPTH + 1
    path = write(tmp_path, json.dumps({"sessions": [{"turns": [
        {"speaker": "A", "text": "[[[{{{" * 200 + ' \\" ' + "\U0001F600 Zoë"}]}]}))
    assert load_dialogues(path)[0].turns[0].text.endswith("\U0001F600 Zoë")
