"""Question-set tests: category filters, dedupe, category 5, limits and errors on the synthetic fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recollect.dialogue.loaders import load_dialogues
from recollect.eval.questions import (
    CATEGORY_NAMES,
    NOT_MENTIONED_OPTION,
    QuestionError,
    adversarial_options,
    build_question_set,
    load_questions,
    map_option_reply,
)

QUIRKS = Path(__file__).resolve().parents[1] / "fixtures" / "locomo_quirks.json"
DEV = Path("/work/shared/data/locomo/locomo_dev.json")


def test_category_names() -> None:
    assert CATEGORY_NAMES == {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }


def test_default_set_dedupes_within_conversation() -> None:
    qs = build_question_set(QUIRKS)
    assert len(qs) == 12
    assert qs.counts == {1: 2, 2: 2, 3: 2, 4: 6}
    assert [(d.id, d.is_duplicate_of) for d in qs.duplicates] == [("conv-q1#10", "conv-q1#2")]
    ids = [q.id for q in qs]
    assert "conv-q1#11" in ids  # same question, different gold: not a duplicate
    assert "conv-q1#12" in ids and "conv-q2#0" in ids  # same text in two conversations: not duplicates
    assert qs.no_evidence == 2
    assert all(q.category in (1, 2, 3, 4) for q in qs)


def test_counts_for_every_setting() -> None:
    assert len(build_question_set(QUIRKS, dedupe=False)) == 13
    with_adv = build_question_set(QUIRKS, include_adversarial=True)
    assert len(with_adv) == 14 and with_adv.counts[5] == 2
    # The conv-q2 category-5 copy collapses into its category-4 twin (the category is not in the key).
    assert ("conv-q2#1", "conv-q2#0") in [(d.id, d.is_duplicate_of) for d in with_adv.duplicates]
    assert len(build_question_set(QUIRKS, include_adversarial=True, dedupe=False)) == 16


def test_summary_reports_settings_and_counts() -> None:
    s = build_question_set(QUIRKS, include_adversarial=True).summary()
    assert s["dedupe"] is True and s["include_adversarial"] is True
    assert s["n_questions"] == 14 and s["n_duplicates_dropped"] == 2
    assert s["per_category"]["5 adversarial"] == 2 and s["per_category"]["1 multi-hop"] == 2


def test_filters_and_limit() -> None:
    only = build_question_set(QUIRKS, conversations=["conv-q2"])
    assert [q.id for q in only] == ["conv-q2#0", "conv-q2#2"] and only.conversations == ("conv-q2",)
    cat2 = build_question_set(QUIRKS, categories=[2])
    assert [q.id for q in cat2] == ["conv-q1#0", "conv-q1#4"]
    limited = build_question_set(QUIRKS, limit=2)
    assert [q.id for q in limited] == ["conv-q1#0", "conv-q1#1", "conv-q2#0", "conv-q2#2"]


def test_accepts_samples_and_conversations() -> None:
    from_path = [q.id for q in build_question_set(QUIRKS)]
    samples = json.loads(QUIRKS.read_text())
    assert [q.id for q in build_question_set(samples)] == from_path
    assert [q.id for q in build_question_set(load_dialogues(QUIRKS))] == from_path


def test_errors_name_the_problem() -> None:
    with pytest.raises(QuestionError, match="conv-zz") as exc:
        build_question_set(QUIRKS, conversations=["conv-zz"])
    assert str(QUIRKS) in str(exc.value) and "conv-q1" in str(exc.value)
    with pytest.raises(QuestionError, match="unknown category 7"):
        build_question_set(QUIRKS, categories=[1, 7])
    assert issubclass(QuestionError, ValueError)


def test_bad_question_item_names_record(tmp_path: Path) -> None:
    samples = json.loads(QUIRKS.read_text())
    del samples[1]["qa"][1]["adversarial_answer"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(samples))
    with pytest.raises(QuestionError) as exc:
        load_questions(path)
    assert str(path) in str(exc.value) and "conv-q2 qa[1]" in str(exc.value)
    assert "adversarial_answer" in str(exc.value)


def test_two_option_format_is_seeded() -> None:
    adv = [q for q in build_question_set(QUIRKS, categories=[5], dedupe=False)]
    first = [adversarial_options(q, seed=7) for q in adv]
    assert first == [adversarial_options(q, seed=7) for q in adv]
    for q, p in zip(adv, first, strict=True):
        assert set(p.options) == {NOT_MENTIONED_OPTION, q.gold}
        assert p.question == f"{q.question} Select the correct answer: (a) {p.options[0]} (b) {p.options[1]}."
    orders = {adversarial_options(adv[0], seed=s).options for s in range(20)}
    assert len(orders) == 2  # both orders occur across seeds


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("a", "X"),
        ("B", "Y"),
        ("(a)", "X"),
        ("(b) Y", "Y"),
        ("b.", "Y"),
        (" ( a ) ", "X"),
        ("a trophy", "a trophy"),
        ("Not mentioned", "Not mentioned"),
        ("", ""),
        (None, ""),
    ],
)
def test_map_option_reply(reply: str | None, expected: str) -> None:
    assert map_option_reply(reply, ("X", "Y")) == expected


@pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo dev split not present")
def test_dev_split_counts() -> None:
    judged = build_question_set(DEV)
    assert len(judged) == 233 and judged.counts == {1: 43, 2: 63, 3: 13, 4: 114}
    assert judged.no_evidence == 2
    assert len(build_question_set(DEV, include_adversarial=True)) == 303
    assert len(build_question_set(DEV, include_adversarial=True, dedupe=False)) == 304
