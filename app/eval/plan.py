"""`recollect eval`'s plan: what the user chose, checked before any work, and the question set it selects.

Everything is validated up front (file, methods, categories, conversations, numbers), so a bad
choice is one clear `EvalError`, never a failure an hour into a run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from recollect.dialogue.loaders import load_dialogues
from recollect.dialogue.models import Conversation
from recollect.eval.metrics import session_of
from recollect.eval.questions import (
    CATEGORY_NAMES,
    Question,
    QuestionSet,
    build_question_set,
    stratified_sample,
)

JUDGED_CATEGORIES = (1, 2, 3, 4)

class EvalError(ValueError):
    """A user-fixable problem with an eval request; the message names the offending value."""


@dataclass(frozen=True)
class Plan:
    """Everything a run needs once the inputs are validated."""

    data_path: Path
    dataset_sha256: str
    methods: list[str]
    conversations: dict[str, Conversation]  # sample_id -> (possibly session-restricted) conversation
    qset: QuestionSet
    questions: list[Question]
    duplicate_of: dict[str, str]
    max_sessions: int | None
    limit: int | None
    sample: int | None = None  # a stratified sample of this many questions (by category), else all selected
    seed: int = 0


# --------------------------------------------------------------------------------------------- validation


def _check_methods(methods: Iterable[str] | None) -> list[str]:
    from recollect.graphs.registry import METHODS as GRAPHS
    from recollect.graphs.registry import available_methods

    available = available_methods()
    chosen = list(dict.fromkeys(methods)) if methods else available
    if not chosen:
        raise EvalError("no methods selected")
    for m in chosen:
        if m not in GRAPHS:
            raise EvalError(f"unknown method {m!r} (choose from: {', '.join(GRAPHS)})")
        if m not in available:
            raise EvalError(f"method {m!r} is not available in this installation (available: {', '.join(available)})")
    return chosen


def _check_numbers(limit: int | None, concurrency: int, max_sessions: int | None) -> None:
    if limit is not None and limit < 1:
        raise EvalError(f"limit must be >= 1, got {limit}")
    if concurrency < 1:
        raise EvalError(f"concurrency must be >= 1, got {concurrency}")
    if max_sessions is not None and max_sessions < 1:
        raise EvalError(f"max_sessions must be >= 1, got {max_sessions}")


def _check_categories(categories: Iterable[int], include_adversarial: bool) -> list[int]:
    cats = sorted(set(categories))
    bad = [c for c in cats if isinstance(c, bool) or c not in CATEGORY_NAMES]
    if bad:
        raise EvalError(f"unknown category {bad[0]!r} (known: {', '.join(map(str, CATEGORY_NAMES))})")
    if not cats and not include_adversarial:
        raise EvalError("no categories selected")
    return cats


def _load_conversations(data_path: Path) -> list[Conversation]:
    if not data_path.is_file():
        raise EvalError(f"{data_path}: data file not found")
    convs = load_dialogues(data_path)  # DialogueError (a ValueError) names file, record and field
    if not all(c.extra.get("format") == "locomo" for c in convs):
        raise EvalError(f"{data_path}: not a LoCoMo file (expected a list of samples with 'conversation' and 'qa')")
    return convs


def _restrict_sessions(conv: Conversation, max_sessions: int | None) -> Conversation:
    if max_sessions is None:
        return conv
    return replace(conv, sessions=conv.sessions[:max_sessions])


def _answerable_in(q: Question, conv: Conversation) -> bool:
    """Smoke runs on the first N sessions keep only questions whose whole gold evidence lies there."""
    kept = {s.index for s in conv.sessions}
    return bool(q.evidence_ids) and all(session_of(e) in kept for e in q.evidence_ids)


def _duplicate_map(questions: Sequence[Question]) -> dict[str, str]:
    """With dedupe off, later exact copies still point at their first occurrence (`is_duplicate_of`)."""
    first: dict[tuple[str, str, str], str] = {}
    out: dict[str, str] = {}
    for q in questions:
        key = (q.sample_id, q.question, q.gold)
        if key in first:
            out[q.id] = first[key]
        else:
            first[key] = q.id
    return out


def plan_run(
    data_path: str | Path,
    methods: Iterable[str] | None = None,
    conversations: Iterable[str] | None = None,
    categories: Iterable[int] = JUDGED_CATEGORIES,
    limit: int | None = None,
    concurrency: int = 1,
    include_adversarial: bool = False,
    dedupe: bool = True,
    max_sessions: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> Plan:
    """Validate the request and select the questions; raises `EvalError`/`ValueError` naming the problem."""
    path = Path(data_path)
    _check_numbers(limit, concurrency, max_sessions)
    chosen_methods = _check_methods(methods)
    cats = _check_categories(categories, include_adversarial)
    convs = _load_conversations(path)
    ids = [c.id for c in convs]
    wanted = list(dict.fromkeys(conversations)) if conversations else ids
    unknown = [c for c in wanted if c not in ids]
    if unknown:
        raise EvalError(f"unknown conversation {unknown[0]!r} in {path.name} (available: {', '.join(ids)})")
    # The limit is applied here rather than in build_question_set so it counts answerable questions, and
    # after the sample, so a limited run is the head of each conversation's share of the sampled one (its
    # rows are rows of the bigger run).
    qset = build_question_set(convs, cats, dedupe=dedupe, include_adversarial=include_adversarial,
                              conversations=wanted)
    by_id = {c.id: _restrict_sessions(c, max_sessions) for c in convs if c.id in wanted}
    answerable = [q for q in qset.questions
                  if max_sessions is None or _answerable_in(q, by_id[q.sample_id])]
    if sample is not None:
        if sample < 1:
            raise EvalError(f"--sample must be at least 1, got {sample}")
        answerable = stratified_sample(answerable, sample, seed)
    questions: list[Question] = []
    taken: dict[str, int] = {}
    for q in answerable:
        if limit is not None and taken.get(q.sample_id, 0) >= limit:
            continue
        taken[q.sample_id] = taken.get(q.sample_id, 0) + 1
        questions.append(q)
    if not questions:
        raise EvalError("the selection holds no questions (check --conversations, --categories, --max-sessions)")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return Plan(path, sha, chosen_methods, by_id, qset, questions,
                {} if dedupe else _duplicate_map(qset.questions), max_sessions, limit, sample, seed)


# --------------------------------------------------------------------------------------------- judge & names


def namespace_for(sample_id: str, max_sessions: int | None) -> str:
    # A session-restricted run gets its own namespace so it never shares memory with a full one.
    return f"locomo-{sample_id}" + (f"-s{max_sessions}" if max_sessions else "")
