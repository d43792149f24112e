"""`answer_absolute_dates`: relative times and ISO dates in an answer become absolute dates, against
the session date of the turn that says them; every graph does it in its last step."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from recollect.dates import DatedTurn, absolute_dates, parse_day, pick_reference, relative_phrases
from recollect.graphs.registry import AllMethodsContext, load_graph
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.spoken_days import spoken_day
from tests.helpers import make_conversation, run_graph

REF = date(2023, 5, 25)  # a Thursday


@pytest.mark.parametrize(("answer", "expected"), [
    ("next month", "June 2023"),
    ("last month", "April 2023"),
    ("last year", "2022"),
    ("yesterday", "24 May 2023"),
    ("three days ago", "22 May 2023"),
    ("2 months ago", "March 2023"),
    ("last week", "the week before 25 May 2023"),
    ("Last Saturday.", "The Saturday before 25 May 2023."),
    ("next weekend", "the weekend after 25 May 2023"),
    ("a few days ago", "a few days before 25 May 2023"),
    ("two weeks ago", "two weeks before 25 May 2023"),
    # inside a sentence a date gets its preposition, unless one is there already
    ("She is going camping next month.", "She is going camping in June 2023."),
    ("He ran the race yesterday with Bob", "He ran the race on 24 May 2023 with Bob"),
    ("since last year", "since 2022"),
])
def test_relative_phrases_resolve_against_the_reference(answer: str, expected: str) -> None:
    out = absolute_dates(answer, REF)
    assert out.answer == expected and out.unresolved == []
    assert [c["from"] for c in out.changes] == relative_phrases(answer)


def test_month_arithmetic_crosses_the_year() -> None:
    assert absolute_dates("next month", date(2023, 12, 3)).answer == "January 2024"
    assert absolute_dates("last month", date(2023, 1, 3)).answer == "December 2022"


@pytest.mark.parametrize(("answer", "expected"), [
    ("2023-05-25", "25 May 2023"),
    ("May 08, 2023", "8 May 2023"),
    ("June 9th, 2023", "9 June 2023"),
    ("on the 3rd of June, 2023", "on 3 June 2023"),
    ("Sept 3, 2023", "3 September 2023"),
    ("2023-02-30", "2023-02-30"),  # not a calendar date: left as it is
    ("8 May, 2023", "8 May, 2023"),  # already the dialogue's form
    ("Pixel", "Pixel"),
])
def test_dates_are_written_the_dialogues_way_without_a_reference(answer: str, expected: str) -> None:
    out = absolute_dates(answer, None)
    assert out.answer == expected and out.unresolved == []


def test_without_a_reference_relative_phrases_stay_and_are_reported() -> None:
    out = absolute_dates("on 2023-05-08 and again last week", None)
    assert out.answer == "on 8 May 2023 and again last week"
    assert out.unresolved == ["last week"] and out.changes == [{"from": "2023-05-08", "to": "8 May 2023"}]


def test_parse_day_reads_the_dialogue_forms() -> None:
    assert parse_day("1:56 pm on 8 May, 2023") == date(2023, 5, 8)
    assert parse_day("2023-05-20T09:30") == date(2023, 5, 20)
    assert parse_day("8 May, 2023") == date(2023, 5, 8)
    assert parse_day("sometime in spring") is None and parse_day(None) is None


def test_the_reference_is_the_turn_that_says_the_phrase() -> None:
    turns = {
        "D1:1": DatedTurn("D1:1", "We go camping next month!", date(2023, 5, 1)),
        "D2:4": DatedTurn("D2:4", "The tent is ready.", date(2023, 6, 9)),
        "D3:2": DatedTurn("D3:2", "Camping next month, finally", date(2023, 7, 2)),
        "D4:1": DatedTurn("D4:1", "undated", None),
    }
    # a cited turn that says it wins over the first cited turn and over shown turns
    assert pick_reference(["next month"], ["D2:4", "D3:2"], ["D1:1"], turns) == (turns["D3:2"], "cited turn says it")
    # then a shown turn that says it, in the order shown
    assert pick_reference(["next month"], ["D2:4"], ["D4:1", "D1:1", "D3:2"], turns) == (turns["D1:1"], "shown turn says it")
    # then the first dated cited turn
    assert pick_reference(["last week"], ["D4:1", "D2:4"], ["D1:1"], turns) == (turns["D2:4"], "first cited turn")
    assert pick_reference(["last week"], ["D4:1"], [], turns) is None
    # words, not characters: number words match digits, punctuation and case do not matter
    said = {"D5:1": DatedTurn("D5:1", "We met Four years ago!", date(2023, 5, 8))}
    assert pick_reference(["4 years ago"], [], ["D5:1"], said) == (said["D5:1"], "shown turn says it")
    assert pick_reference(["last month"], [], ["D5:1"], {"D5:1": DatedTurn("D5:1", "the last monthly bill", date(2023, 5, 8))}) is None


CONV = make_conversation([
    [("Ann", "I got a new kitten called Pixel"), ("Bob", "lovely")],
    [("Ann", "We are going camping next month"), ("Bob", "have fun")],
])


def _answer(text: str, supports: list[str]) -> Any:
    return lambda msgs, kw: {"answer": text, "supports": supports}


@pytest.fixture
def built(data_dir: str) -> AllMethodsContext:
    ingest_conversation(CONV, "life", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    return AllMethodsContext(data_dir=data_dir)


def test_every_graph_ends_with_absolute_dates(built: AllMethodsContext) -> None:
    """The rag graph cites D2:1 (2 May 2023): "next month" becomes June 2023, in the state, the
    thread's message and the trace."""
    ctx = built.with_overrides(chat_model=scripted(default=_answer("next month", ["D2:1"])))
    out, state = run_graph(load_graph("rag"), ctx, "life", "When is Ann going camping?")
    assert out["answer"] == "June 2023" and state["messages"][-1].content == "June 2023"
    record = next(r for r in state["trace"] if r["node"] == "absolute_dates")
    assert record["model_answer"] == "next month" and record["changes"] == [{"from": "next month", "to": "June 2023"}]
    assert state.get("answer_before_rewrite") is None  # the eval's draft is a rewrite's input, not the date step's
    assert (record["reference_turn"], record["reference_date"], record["reference_from"]) == \
        ("D2:1", "2023-05-02", "cited turn says it")


def test_a_citation_without_the_phrase_falls_back_to_the_shown_turn(built: AllMethodsContext) -> None:
    ctx = built.with_overrides(chat_model=scripted(default=_answer("next month", ["D1:1"])))
    out, state = run_graph(load_graph("rag"), ctx, "life", "When is Ann going camping?")
    assert out["answer"] == "June 2023"
    assert next(r for r in state["trace"] if r["node"] == "absolute_dates")["reference_turn"] == "D2:1"


def test_the_setting_off_keeps_the_models_answer(built: AllMethodsContext) -> None:
    ctx = built.with_overrides(chat_model=scripted(default=_answer("next month", ["D2:1"])), answer_absolute_dates=False)
    out, state = run_graph(load_graph("rag"), ctx, "life", "When is Ann going camping?")
    assert out["answer"] == "next month" and "absolute_dates" not in [r["node"] for r in state["trace"]]


def test_an_answer_without_dates_leaves_no_record(built: AllMethodsContext) -> None:
    ctx = built.with_overrides(chat_model=scripted(default=_answer("Pixel", ["D1:1"])))
    out, state = run_graph(load_graph("rag"), ctx, "life", "What is the kitten called?")
    assert out["answer"] == "Pixel" and "absolute_dates" not in [r["node"] for r in state["trace"]]


def test_the_replay_script_applies_the_graph_step_to_an_earlier_run(built: AllMethodsContext, tmp_path: Any, capsys: Any) -> None:
    """benchmarks/answer_dates_replay.py: the rows of a run made without the step, replayed and re-scored;
    --check compares a run made with it."""
    import json

    from benchmarks import answer_dates_replay

    row = {"method": "rag", "question_id": "conv-t#0", "sample_id": "conv-t", "category": 2, "gold": "June 2023",
           "prediction": "next month", "locomo_f1": 0.0, "supports": ["D1:1"], "retrieved_turn_ids": ["D1:1", "D2:1"]}
    old, new = tmp_path / "old", tmp_path / "new"
    for run, prediction in ((old, "next month"), (new, "June 2023")):
        run.mkdir()
        (run / "per_question.jsonl").write_text(json.dumps({**row, "prediction": prediction}) + "\n")
        (run / "run_config.json").write_text(json.dumps({"max_sessions": None}))
    # the eval's namespace for conv-t is locomo-conv-t; reuse the ingested turns under that name
    ingest_conversation(CONV, "locomo-conv-t", built, methods=["memr3"])
    replayed = answer_dates_replay.replay(*answer_dates_replay.load_rows(old), built.data_dir)
    assert replayed[0]["replayed"] == "June 2023" and replayed[0]["replayed_f1"] == 1.0
    assert answer_dates_replay.main([str(old), "--data-dir", built.data_dir, "--check", str(new)]) == 0
    out = capsys.readouterr().out
    assert "| rag | 1 | 0.00 | 100.00 | 1 |" in out and "check: 1 of 1 answers equal the replay" in out


@pytest.mark.parametrize(("text", "day"), [
    ("I went yesterday", date(2023, 5, 7)),
    ("the day before yesterday", date(2023, 5, 6)),
    ("we met two weeks ago", date(2023, 4, 24)),
    ("3 days ago, and yesterday too", date(2023, 5, 5)),  # the first phrase counts
    ("last Saturday was fun", date(2023, 5, 6)),
    ("see you next Monday", date(2023, 5, 15)),  # said on a Monday: the next one, not today
    ("this weekend", date(2023, 5, 13)),
    ("last weekend", date(2023, 5, 6)),
    ("next week", date(2023, 5, 15)),
    ("next month!", date(2023, 6, 15)),  # a month stands for its middle day
    ("last year", date(2022, 7, 1)),
    ("on 2023-04-01", date(2023, 4, 1)),
    ("May 3, 2023 was a good day", date(2023, 5, 3)),
    ("tonight", date(2023, 5, 8)),
])
def test_spoken_day_is_the_day_a_turn_speaks_of(text: str, day: date) -> None:
    assert spoken_day(text, date(2023, 5, 8)) == day  # a Monday


def test_spoken_day_is_none_without_a_definite_time() -> None:
    assert spoken_day("a few days ago", date(2023, 5, 8)) is None
    assert spoken_day("I love painting", date(2023, 5, 8)) is None
    assert spoken_day("a few days ago, then last Friday", date(2023, 5, 8)) == date(2023, 5, 5)
