"""MRAgent's prefix layout (mra_prefix_layout) and the skipped span rewrite (mra_rewrite_skip_words)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from recollect.graphs.registry import AllMethodsContext
from tests.methods.mragent.fakes import QuestionModel, ingest
from tests.methods.mragent.test_memory import CONTEXT_D1_2, TIME_D1_3, nav, prompts, run

ID = re.compile(r"\bD\d+:\d+(?:-\d+)?\b")
ROUNDS = [nav([CONTEXT_D1_2]), nav([TIME_D1_3], keep=["D1:3-1"]),
          nav([("query_event_context", {"event_id": "D2:1"})]),
          {"mode": "answer", "answer": "Riverside shelter", "supports": ["D1:3"]}]


@pytest.fixture
def base(data_dir: str) -> AllMethodsContext:
    ctx, _ = ingest(data_dir)
    return ctx


def navigates(base: AllMethodsContext, layout: bool) -> list[str]:
    qm = QuestionModel(navigate=list(ROUNDS))
    run(base.with_overrides(chat_model=qm.model, mra_prefix_layout=layout))
    return prompts(qm, "You answer a question")


def test_each_round_starts_with_the_last_rounds_prompt_through_its_earlier_calls(base: AllMethodsContext) -> None:
    navs = navigates(base, True)
    assert len(navs) == 4
    for before, after in zip(navs, navs[1:], strict=False):
        shared = before[: len(os.path.commonprefix([before, after]))]
        assert "Seed memories:" in shared and "Question:" in shared
        earlier = before.split("Earlier calls, oldest first", 1)[1].split("\n\n", 1)[0]
        calls = "\n".join(line for line in earlier.split("\n") if line.startswith("[round"))
        assert calls in shared  # the earlier calls only grow at their end
    assert 'query_event_context({"event_id": "D1:2", "window": 1})' in navs[3].split("Kept memories:")[0]


def test_each_round_shows_the_same_ids_and_texts_in_either_layout(base: AllMethodsContext) -> None:
    old, new = navigates(base, False), navigates(base, True)
    assert len(old) == len(new) == 4
    for a, b in zip(old, new, strict=True):
        assert sorted(set(ID.findall(a))) == sorted(set(ID.findall(b)))
        lines = {line for line in a.split("\n") if ID.search(line) and not line.startswith("[round")}
        assert lines <= set(b.split("\n")) | {line for line in lines if "(kept" in line}


def answering(answer: str) -> QuestionModel:
    return QuestionModel(navigate=[{"mode": "answer", "answer": answer, "supports": ["D1:3"], "confidence": 0.8}])


def rewrites(qm: QuestionModel) -> int:
    return qm.kinds.count("rewrite")


def test_a_short_span_skips_the_rewrite_and_the_trace_says_why(base: AllMethodsContext) -> None:
    qm = answering("Riverside shelter")
    state, _ = run(base.with_overrides(chat_model=qm.model))
    record = next(r for r in state["trace"] if r["node"] == "answer")
    assert rewrites(qm) == 0 and state["answer"] == "Riverside shelter"
    assert record["skipped_call"] == "rewrite_answer" and "mra_rewrite_skip_words" in record["skip_reason"]


@pytest.mark.parametrize("answer,kw", [("Ann found Pixel at the Riverside shelter", {}),
                                       ("on 1 May", {}),
                                       ("Riverside shelter", {"mra_rewrite_skip_words": 0})])
def test_long_answers_dates_and_a_zero_setting_are_rewritten(base: AllMethodsContext, answer: str, kw: dict[str, Any]) -> None:
    qm = answering(answer)
    state, _ = run(base.with_overrides(chat_model=qm.model, **kw))
    assert rewrites(qm) == 1
    assert not any(r.get("skipped_call") for r in state["trace"])


def test_the_paper_profile_turns_both_off() -> None:
    paper = AllMethodsContext(profile="paper")
    assert paper.mra_prefix_layout is False and paper.mra_rewrite_skip_words == 0
    tuned = AllMethodsContext()
    assert tuned.mra_prefix_layout is True and tuned.mra_rewrite_skip_words == 3
