"""LoCoMo questions: loading with quirks Q1–Q10 (tests/eval/test_questions.py shows each) and question-set building.

The loader keeps every QA item at its original position; duplicates are collapsed only when a question
set is built, so ids (`<sample_id>#<position>`) stay stable whatever the settings.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recollect.dialogue.loaders import conversation_from_locomo, read_locomo_samples
from recollect.dialogue.models import Conversation

CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL_CATEGORY = 5
NOT_MENTIONED_OPTION = "Not mentioned in the conversation"

_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_TOKEN = re.compile(r"D:?(\d+):(\d+)")
_OPTION_REPLY = re.compile(r"\(\s*([ab])\s*\)|([ab])[.)]?", re.IGNORECASE)
_KNOWN_QA_KEYS = {"question", "answer", "adversarial_answer", "evidence", "category"}


class QuestionError(ValueError):
    """Question data or a question-set request is invalid; the message names the file/record/field."""


@dataclass(frozen=True)
class Question:
    id: str  # "<sample_id>#<0-based position in the sample's qa list>"
    sample_id: str
    position: int
    question: str
    gold: str  # always str(gold_raw): scorers and the judge never see an int (Q1)
    gold_raw: Any
    category: int
    category_name: str
    evidence_raw: tuple[Any, ...]
    evidence_ids: tuple[str, ...]
    evidence_dropped: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    is_duplicate_of: str | None = None

    @property
    def category_label(self) -> str:
        """`1 multi-hop`: reports print the number and the name together."""
        return f"{self.category} {self.category_name}"


@dataclass
class QuestionSet:
    questions: list[Question]
    duplicates: list[Question]  # dropped items; each has `is_duplicate_of` set to the kept id
    categories: tuple[int, ...]
    dedupe: bool
    include_adversarial: bool
    conversations: tuple[str, ...]
    limit: int | None = None

    @property
    def counts(self) -> dict[int, int]:
        return {c: sum(q.category == c for q in self.questions) for c in self.categories}

    @property
    def no_evidence(self) -> int:
        """Kept questions with no resolvable gold evidence (excluded from evidence recall)."""
        return sum(not q.evidence_ids for q in self.questions)

    def summary(self) -> dict[str, Any]:
        """The effective settings and counts every report must carry."""
        return {
            "dedupe": self.dedupe,
            "include_adversarial": self.include_adversarial,
            "categories": list(self.categories),
            "conversations": list(self.conversations),
            "limit": self.limit,
            "n_questions": len(self.questions),
            "n_duplicates_dropped": len(self.duplicates),
            "n_no_evidence": self.no_evidence,
            "per_category": {f"{c} {CATEGORY_NAMES[c]}": n for c, n in self.counts.items()},
        }

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)


# --------------------------------------------------------------------------------------------- evidence


def _evidence_tokens(raw: Any) -> Iterable[str]:
    if isinstance(raw, list | tuple):
        for item in raw:
            yield from _evidence_tokens(item)
    elif raw is not None:
        yield from (t for t in _EVIDENCE_SPLIT.split(str(raw)) if t)


def parse_evidence(raw: Any, valid_ids: Iterable[str] | None = None) -> tuple[list[str], list[str]]:
    """Tolerant evidence parsing: returns (resolved canonical ids, dropped raw tokens).

    `raw` may be a string, a list of strings or nested lists (observation slots). Tokens are split on
    runs of `;`, `,` and whitespace, canonicalised through integers (`D30:05` → `D30:5`, `D:11:26` →
    `D11:26`) and kept only when they name a turn of the conversation (`valid_ids`, when given).
    """
    valid = None if valid_ids is None else set(valid_ids)
    kept: list[str] = []
    dropped: list[str] = []
    for token in _evidence_tokens(raw):
        m = _EVIDENCE_TOKEN.fullmatch(token)
        canonical = f"D{int(m[1])}:{int(m[2])}" if m else None
        if canonical is None or (valid is not None and canonical not in valid):
            dropped.append(token)
        elif canonical not in kept:
            kept.append(canonical)
    return kept, dropped


# --------------------------------------------------------------------------------------------- loading


def _gold_field(item: dict[str, Any], category: int) -> str:
    # Category 5 keeps its gold under `adversarial_answer` (Q2); a stray `answer` is never the gold.
    return "adversarial_answer" if category == ADVERSARIAL_CATEGORY else "answer"


def questions_from_sample(
    sample: dict[str, Any], valid_ids: Iterable[str] | None = None, source: str = ""
) -> list[Question]:
    """Every QA item of one raw LoCoMo sample, in file order, with nothing dropped."""
    sample_id = str(sample.get("sample_id", ""))
    where = f"{source}: {sample_id}" if source else sample_id
    qa = sample.get("qa", [])
    if not isinstance(qa, list):
        raise QuestionError(f"{where}: field 'qa' must be a list")
    valid = set(valid_ids) if valid_ids is not None else None
    out: list[Question] = []
    for pos, item in enumerate(qa):
        rec = f"{where} qa[{pos}]"
        if not isinstance(item, dict):
            raise QuestionError(f"{rec}: item must be an object")
        category = item.get("category")
        if isinstance(category, bool) or category not in CATEGORY_NAMES:
            raise QuestionError(f"{rec}: field 'category' must be an integer 1-5, got {category!r}")
        text = item.get("question")
        if not isinstance(text, str):
            raise QuestionError(f"{rec}: field 'question' is missing or not a string")
        gold_key = _gold_field(item, category)
        if gold_key not in item:
            raise QuestionError(f"{rec}: field {gold_key!r} (the gold for category {category}) is missing")
        gold_raw = item[gold_key]
        evidence = item.get("evidence", [])
        evidence_raw = tuple(evidence) if isinstance(evidence, list) else (evidence,)
        ids, dropped = parse_evidence(list(evidence_raw), valid)
        extra = {k: v for k, v in item.items() if k not in _KNOWN_QA_KEYS}
        if category == ADVERSARIAL_CATEGORY and "answer" in item:
            extra["answer"] = item["answer"]
        out.append(
            Question(
                id=f"{sample_id}#{pos}",
                sample_id=sample_id,
                position=pos,
                question=text,
                gold=str(gold_raw),
                gold_raw=gold_raw,
                category=category,
                category_name=CATEGORY_NAMES[category],
                evidence_raw=evidence_raw,
                evidence_ids=tuple(ids),
                evidence_dropped=tuple(dropped),
                extra=extra,
            )
        )
    return out


Source = str | Path | Sequence[dict[str, Any]] | Sequence[Conversation]


def _samples_with_ids(source: Source) -> tuple[str, list[tuple[dict[str, Any], set[str]]]]:
    """Normalise a path, raw samples or loaded conversations to (label, [(sample, dia_ids)])."""
    if isinstance(source, str | Path):
        label = str(source)
        raw = read_locomo_samples(source)
        items = []
        for i, s in enumerate(raw):
            conv = conversation_from_locomo(s, label, i)
            items.append((s, {t.id for t in conv.turns}))
        return label, items
    items = []
    for i, entry in enumerate(source):
        if isinstance(entry, Conversation):
            if "qa" not in entry.extra:
                raise QuestionError(f"{entry.source or entry.id}: conversation {entry.id} carries no LoCoMo 'qa' list")
            items.append(({"sample_id": entry.id, "qa": entry.extra["qa"]}, {t.id for t in entry.turns}))
        elif isinstance(entry, dict):
            conv = conversation_from_locomo(entry, "<samples>", i)
            items.append((entry, {t.id for t in conv.turns}))
        else:
            raise QuestionError(
                f"<samples>[{i}]: expected a LoCoMo sample or a Conversation, got {type(entry).__name__}"
            )
    return "<samples>", items


def load_questions(source: Source) -> list[Question]:
    """All questions of a LoCoMo file (or samples/conversations), every category, file order."""
    label, items = _samples_with_ids(source)
    return [q for s, ids in items for q in questions_from_sample(s, ids, label)]


def build_question_set(
    source: Source,
    categories: Iterable[int] = (1, 2, 3, 4),
    dedupe: bool = True,
    include_adversarial: bool = False,
    conversations: Iterable[str] | None = None,
    limit: int | None = None,
) -> QuestionSet:
    """The scored questions: category and conversation filters, exact-duplicate collapse, per-conversation limit.

    Duplicates are keyed by (sample_id, question text as stored, str(gold)), category excluded; the first
    occurrence in file order is kept. Category 5 joins when `include_adversarial` is on (or when it is
    named in `categories` explicitly).
    """
    label, items = _samples_with_ids(source)
    cats = sorted(set(categories) | ({ADVERSARIAL_CATEGORY} if include_adversarial else set()))
    for c in cats:
        if isinstance(c, bool) or c not in CATEGORY_NAMES:
            raise QuestionError(f"{label}: unknown category {c!r}; known: {sorted(CATEGORY_NAMES)}")
    if not cats:
        raise QuestionError(f"{label}: no categories selected")
    if limit is not None and limit < 0:
        raise QuestionError(f"{label}: limit must be >= 0, got {limit}")
    available = [str(s.get("sample_id")) for s, _ in items]
    chosen = list(dict.fromkeys(conversations)) if conversations is not None else available
    unknown = [c for c in chosen if c not in available]
    if unknown:
        raise QuestionError(
            f"{label}: unknown conversation id(s) {unknown}; available: {', '.join(available)}"
        )

    kept: list[Question] = []
    dups: list[Question] = []
    for sample, ids in items:
        if str(sample.get("sample_id")) not in chosen:
            continue
        first_seen: dict[tuple[str, str, str], str] = {}
        taken = 0
        for q in questions_from_sample(sample, ids, label):
            if q.category not in cats:
                continue
            key = (q.sample_id, q.question, q.gold)
            if dedupe and key in first_seen:
                dups.append(_replace_dup(q, first_seen[key]))
                continue
            first_seen.setdefault(key, q.id)
            if limit is not None and taken >= limit:
                continue
            kept.append(q)
            taken += 1
    return QuestionSet(
        questions=kept,
        duplicates=dups,
        categories=tuple(cats),
        dedupe=dedupe,
        include_adversarial=include_adversarial or ADVERSARIAL_CATEGORY in cats,
        conversations=tuple(c for c in available if c in chosen),
        limit=limit,
    )


def stratified_sample(questions: Sequence[Question], n: int, seed: int = 0) -> list[Question]:
    """`n` of `questions`, each category represented in proportion to its share (largest remainder),
    drawn with a seeded RNG inside each category, returned in file order.

    The same questions, `n` and seed give the same sample on every machine, so a run can be stopped,
    resumed and compared with another method's run question by question.
    """
    if n >= len(questions):
        return list(questions)
    by_cat: dict[int, list[Question]] = {}
    for q in questions:
        by_cat.setdefault(q.category, []).append(q)
    quotas = {c: n * len(qs) / len(questions) for c, qs in by_cat.items()}
    take = {c: int(v) for c, v in quotas.items()}
    for c in sorted(quotas, key=lambda c: (-(quotas[c] - take[c]), c))[: n - sum(take.values())]:
        take[c] += 1
    chosen: set[str] = set()
    for c in sorted(by_cat):
        rng = random.Random(f"{seed}|category {c}")
        chosen.update(q.id for q in rng.sample(by_cat[c], take[c]))
    return [q for q in questions if q.id in chosen]


def _replace_dup(q: Question, original: str) -> Question:
    return replace(q, is_duplicate_of=original)


# --------------------------------------------------------------------------------------------- category 5


@dataclass(frozen=True)
class TwoOptionPrompt:
    question: str  # the question text with the "Select the correct answer" suffix
    options: tuple[str, str]  # (a), (b)


def adversarial_options(question: Question, seed: int = 0) -> TwoOptionPrompt:
    """The official two-option format for a category-5 item, option order drawn from a seeded RNG.

    The RNG is seeded per question (seed and question id), so the order does not depend on which other
    questions a run includes or on the order they are asked in.
    """
    rng = random.Random(f"{seed}|{question.id}")
    options = [NOT_MENTIONED_OPTION, question.gold]
    if rng.random() < 0.5:
        options.reverse()
    a, b = options
    return TwoOptionPrompt(
        question=f"{question.question} Select the correct answer: (a) {a} (b) {b}.", options=(a, b)
    )


def map_option_reply(reply: str | None, options: tuple[str, str]) -> str:
    """Map a bare `a`/`b` (or `(a)`/`(b)`, optionally followed by text) back to the option text."""
    text = (reply or "").strip()
    m = _OPTION_REPLY.match(text)
    if m:
        bare = m[2] is not None and m.end() == len(text)
        if m[1] is not None or bare:
            letter = (m[1] or m[2]).lower()
            return options[0] if letter == "a" else options[1]
    return text
