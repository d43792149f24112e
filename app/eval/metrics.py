"""Per-question metrics of the eval (README "Evaluating on LoCoMo"): LoCoMo token F1, Mem0 set F1, BLEU-1, recall, mg_tokens.

Every function takes the prediction and gold as stored (gold may be an int, quirk Q1) and converts with
`str()` itself, so callers can never compare an int to a string by accident. A `None` prediction is
scored as the empty string.
"""

from __future__ import annotations

import re
import string
import warnings
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Literal

from nltk.stem import PorterStemmer
from nltk.tokenize import word_tokenize
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from recollect.llm.usage import mg_token_estimate

BLEU_TOKENIZER = "nltk-treebank-no-punkt"
ADVERSARIAL_MARKERS = ("no information available", "not mentioned")

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_MEM0_SPLIT = str.maketrans({c: " " for c in ".,!?"})
_STEMMER = PorterStemmer()  # default NLTK_EXTENSIONS mode, as in the official scorer
_SMOOTH = SmoothingFunction().method1
_SESSION_OF = re.compile(r"D(\d+):")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


# --------------------------------------------------------------------------------------------- LoCoMo F1


def normalize_answer(text: str) -> str:
    """LoCoMo normalisation N(s), steps 1–5 in order (only ASCII punctuation is removed)."""
    text = text.replace(",", "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


@lru_cache(maxsize=65536)
def _stem(token: str) -> str:
    return _STEMMER.stem(token)


def locomo_tokens(text: str) -> list[str]:
    return [_stem(t) for t in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """F1 over the multiset of stemmed normalised tokens (0 when nothing overlaps)."""
    pred, ref = locomo_tokens(prediction), locomo_tokens(gold)
    overlap = sum((Counter(pred) & Counter(ref)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred), overlap / len(ref)
    return 2 * precision * recall / (precision + recall)


def _multi_hop_f1(prediction: str, gold: str) -> float:
    # Split the raw strings: normalisation deletes the commas we split on.
    pred_parts = [p.strip() for p in prediction.split(",")]
    gold_parts = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in pred_parts) for g in gold_parts) / len(gold_parts)


def locomo_f1(
    prediction: str | None, gold: Any, category: int, variant: Literal["official", "plain"] = "official"
) -> float:
    """The official LoCoMo per-question score S, unrounded.

    `variant="plain"` reproduces MRAgent's released scorer: plain F1 for categories 1–4 (no comma split,
    no `;` cut) and a case-sensitive `Not mentioned` test for category 5.
    """
    pred, ref = _text(prediction), str(gold)
    if category not in (1, 2, 3, 4, 5):
        raise ValueError(f"unknown LoCoMo category {category!r} (expected 1-5)")
    if variant == "plain":
        if category == 5:
            return 1.0 if "Not mentioned" in pred else 0.0
        return token_f1(pred, ref)
    if variant != "official":
        raise ValueError(f"unknown locomo_f1 variant {variant!r} (expected 'official' or 'plain')")
    if category == 5:
        low = pred.lower()
        return 1.0 if any(m in low for m in ADVERSARIAL_MARKERS) else 0.0
    if category == 1:
        return _multi_hop_f1(pred, ref)
    if category == 3:
        ref = ref.split(";")[0].strip()
    return token_f1(pred, ref)


# --------------------------------------------------------------------------------------------- Mem0 metrics


def _mem0_tokens(text: str) -> set[str]:
    return set(text.lower().translate(_MEM0_SPLIT).split())


def mem0_f1(prediction: str | None, gold: Any) -> float:
    """Mem0's set F1: lower-case, `.,!?` → space, whitespace split, sets; no stemming."""
    pred, ref = _text(prediction), str(gold)
    if not pred or not ref:
        return 0.0
    a, b = _mem0_tokens(pred.strip()), _mem0_tokens(ref.strip())
    if not a or not b:
        return 0.0
    common = len(a & b)
    precision, recall = common / len(a), common / len(b)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _bleu_tokens(text: str, tokenizer: str) -> list[str]:
    if tokenizer == BLEU_TOKENIZER:
        return word_tokenize(text, preserve_line=True)  # Treebank only: no Punkt data needed
    if tokenizer == "nltk-punkt":
        try:
            return word_tokenize(text)
        except LookupError as exc:
            raise RuntimeError("bleu tokenizer 'nltk-punkt' needs the NLTK punkt_tab data installed") from exc
    raise ValueError(f"unknown BLEU tokenizer {tokenizer!r}")


def bleu1(prediction: str | None, gold: Any, tokenizer: str = BLEU_TOKENIZER) -> float:
    """Sentence BLEU-1: weights (1,0,0,0), smoothing method1, gold as the single reference."""
    hyp = _bleu_tokens(_text(prediction).lower(), tokenizer)
    ref = _bleu_tokens(str(gold).lower(), tokenizer)
    if not hyp or not ref:
        return 0.0
    with warnings.catch_warnings():  # nltk warns about zero higher-order counts that weigh 0 here
        warnings.simplefilter("ignore")
        return float(sentence_bleu([ref], hyp, weights=(1, 0, 0, 0), smoothing_function=_SMOOTH))


# --------------------------------------------------------------------------------------------- recall & cost


def evidence_recall(retrieved_ids: Iterable[str], gold_ids: Iterable[str]) -> float | None:
    """|R ∩ G| / |G| over turn ids; None when G is empty (such questions are excluded)."""
    gold = set(gold_ids)
    if not gold:
        return None
    return len(gold & set(retrieved_ids)) / len(gold)


def session_of(turn_id: str) -> int | None:
    """Session number of a `D<N>:<k>` id (derived ids such as `D1:3-1` map to their origin's session)."""
    m = _SESSION_OF.match(turn_id)
    return int(m[1]) if m else None


def session_recall(retrieved_ids: Iterable[str], gold_ids: Iterable[str]) -> float | None:
    """Evidence recall at session granularity; None when no gold id names a session."""
    gold = {s for i in gold_ids if (s := session_of(i)) is not None}
    if not gold:
        return None
    got = {s for i in retrieved_ids if (s := session_of(i)) is not None}
    return len(gold & got) / len(gold)


def mg_tokens(text: str) -> float:
    """MGRetrieval's token estimate 1.1·w + 0.35·s (w = `\\w+` runs, s = non-word non-space chars)."""
    return mg_token_estimate(text)


# --------------------------------------------------------------------------------------------- per question


def score_prediction(prediction: str | None, gold: Any, category: int) -> dict[str, float | None]:
    """All lexical scores of one answer; Mem0 F1 and BLEU-1 are None for category 5 ()."""
    f1 = locomo_f1(prediction, gold, category)
    adversarial = category == 5
    return {
        "locomo_f1": f1,
        "locomo_f1_r3": round(f1, 3),
        "mem0_f1": None if adversarial else mem0_f1(prediction, gold),
        "bleu1": None if adversarial else bleu1(prediction, gold),
    }
