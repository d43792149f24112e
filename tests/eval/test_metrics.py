"""Metric tests: the §8 golden vectors (official LoCoMo F1), Mem0 set-F1/BLEU-1 companions, recall, mg_tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recollect.eval.metrics import (
    BLEU_TOKENIZER,
    bleu1,
    evidence_recall,
    locomo_f1,
    mem0_f1,
    mg_tokens,
    normalize_answer,
    score_prediction,
    session_recall,
)

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "locomo_f1_golden.json").read_text())

# (prediction, gold, set F1, BLEU-1) computed with Mem0's metric code (§8 companion table).
COMPANION = [
    ("7 May 2023", "7 May 2023", 1.000, 1.000),
    ("On 7 May, 2023.", "7 May 2023", 0.857, 0.500),
    ("The Adoption Agency!", "an adoption agency", 0.667, 0.500),
    ("hiking and camping", "camping, hiking", 0.800, 0.667),
    ("She paints sunsets", "painting sunset", 0.000, 0.000),
    ("Paris Paris Paris", "Paris", 1.000, 0.333),
    ("Melanie\u2019s kids", "Melanie's kids", 0.500, 0.500),
    ("camping and painting", "pottery, camping, painting", 0.667, 0.342),
    ("In 2022", 2022, 0.667, 0.500),
    ("Likely no", "Likely no; since this one went badly", 0.222, 0.050),
    ("", "7 May 2023", 0.000, 0.000),
    ("she went to the museum yesterday", "the museum", 0.500, 0.333),
    ("Caroline's friend adopted a child in 2022", "2022", 0.250, 0.125),
]


def test_golden_fixture_is_complete() -> None:
    assert [v["id"] for v in GOLDEN] == [f"G{i:02d}" for i in range(1, 28)]
    # G12 and G13 must exercise str() on an integer gold.
    assert isinstance(GOLDEN[11]["gold"], int) and isinstance(GOLDEN[12]["gold"], int)


@pytest.mark.parametrize("vec", GOLDEN, ids=[v["id"] for v in GOLDEN])
def test_locomo_f1_golden(vec: dict) -> None:
    score = locomo_f1(vec["prediction"], vec["gold"], vec["category"])
    assert abs(score - vec["official_f1"]) <= 0.0005 or round(score, 3) == vec["official_f1"]


@pytest.mark.parametrize(("prediction", "gold", "set_f1", "bleu"), COMPANION)
def test_mem0_companions(prediction: str, gold: str | int, set_f1: float, bleu: float) -> None:
    assert mem0_f1(prediction, gold) == pytest.approx(set_f1, abs=0.0005)
    assert bleu1(prediction, gold) == pytest.approx(bleu, abs=0.0005)


def test_normalisation_rules() -> None:
    assert normalize_answer("Self-care, and THE theatre") == "selfcare theatre"
    assert normalize_answer("andrew anthem an") == "andrew anthem"
    # Unicode quotes survive; the article inside them is removed as a whole word.
    assert normalize_answer("\u201ca\u201d") == "\u201c \u201d"


def test_none_prediction_is_empty_string() -> None:
    assert locomo_f1(None, "x", 4) == 0.0
    assert mem0_f1(None, "None") == 0.0
    assert bleu1(None, "x") == 0.0
    assert locomo_f1(None, "x", 5) == 0.0


def test_category_one_parts() -> None:
    # A gold part that normalises to nothing scores 0 and still counts in the mean.
    assert locomo_f1("pottery", "pottery, the", 1) == pytest.approx(0.5)


def test_unknown_category_and_variant() -> None:
    with pytest.raises(ValueError, match="category"):
        locomo_f1("a", "b", 6)
    with pytest.raises(ValueError, match="variant"):
        locomo_f1("a", "b", 4, variant="loose")  # type: ignore[arg-type]


def test_plain_variant() -> None:
    # No comma split for category 1, no ';' cut for category 3, case-sensitive test for category 5.
    assert locomo_f1("pottery and camping", "pottery, camping", 1, variant="plain") == pytest.approx(1.0)
    assert locomo_f1("Likely no", "Likely no; since this one went badly", 3, variant="plain") < 1.0
    assert locomo_f1("NOT MENTIONED", "x", 5, variant="plain") == 0.0
    assert locomo_f1("Not mentioned here", "x", 5, variant="plain") == 1.0


def test_bleu_tokenizer_needs_no_punkt() -> None:
    assert BLEU_TOKENIZER == "nltk-treebank-no-punkt"
    # Two sentences: without Punkt the inner period stays glued to its word.
    assert bleu1("She went. Then home", "she went") < 1.0
    with pytest.raises(ValueError):
        bleu1("a", "a", tokenizer="whitespace")


def test_score_prediction_keys_and_category_five() -> None:
    s = score_prediction("In 2022", 2022, 2)
    assert set(s) == {"locomo_f1", "locomo_f1_r3", "mem0_f1", "bleu1"}
    assert s["locomo_f1_r3"] == round(s["locomo_f1"], 3) == 0.667
    adv = score_prediction("Not mentioned in the conversation", "Yes", 5)
    assert adv == {"locomo_f1": 1.0, "locomo_f1_r3": 1.0, "mem0_f1": None, "bleu1": None}


def test_evidence_and_session_recall() -> None:
    assert evidence_recall(["D1:1", "D2:2"], []) is None
    assert evidence_recall(["D1:1", "D2:2", "D9:9"], ["D1:1", "D3:1"]) == 0.5
    assert evidence_recall([], ["D1:1"]) == 0.0
    assert session_recall(["D1:5", "D3:1-1"], ["D1:1", "D3:2", "D4:1"]) == pytest.approx(2 / 3)
    assert session_recall(["D1:1"], []) is None


def test_mg_tokens() -> None:
    assert mg_tokens("") == 0.0
    assert mg_tokens("hello world") == pytest.approx(2.2)
    # words: hello, world, it, s (4) ; symbols: , ! ' (3)
    assert mg_tokens("Hello, world! it's") == pytest.approx(1.1 * 4 + 0.35 * 3)
    # Unicode letters are word characters; whitespace is neither.
    assert mg_tokens("caf\u00e9  \u2014 na\u00efve\n") == pytest.approx(1.1 * 2 + 0.35 * 1)
