"""MGRetrieval's speaker-only keyword groups and capped rounds: trace fields, eval counts, the demotion setting.

Every turn's speaker is a keyword, so Φ(ann) covers the whole fixture conversation (8 turns by Ann).
With Q = [ann, apple] the pyramid is L2 {ann, apple} = Φ(apple) (5 turns), L1 {ann} (8), {apple} (5).
With a cap of 2 new memories per round, round 1 shows 2 of the 5 apple turns; round 2 then takes the
next group: {ann} (spec order: dense top-2 over all of Ann's turns) or {apple} (speaker groups last).
"""

from __future__ import annotations

from typing import Any

import pytest

from recollect.eval.report import _keyword_round_lines, summarize_method
from recollect.graphs.mgretrieval.graph import graph
from recollect.graphs.mgretrieval.metrics import round_kinds
from recollect.graphs.registry import AllMethodsContext
from tests.helpers import run_graph
from tests.methods.mgretrieval.fakes import FakeAux, ingest_scripted
from tests.methods.mgretrieval.test_graph import KW, SPEC, TEXTS, aux_model, main_model, recs

Q = "What did Ann say about apples?"


@pytest.fixture
def ann_data(data_dir: str) -> str:
    ingest_scripted(data_dir, [[("Ann", t) for t in TEXTS]], FakeAux(KW), mg_match_min_sim=0.99)
    return data_dir


def ask(data_dir: str, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=main_model(False), aux_chat_model=aux_model(["ann", "apple"]),
                  mg_max_new_per_round=2, mg_max_rounds=2, **kw)
    return run_graph(graph, ctx, "ns", Q)


def test_spec_order_marks_the_speaker_round_and_counts_it(ann_data: str) -> None:
    out, state = ask(ann_data, mg_speaker_only_groups="in_order")
    assert [(g["keywords"], g["speaker_only"]) for g in state["mg_pyramid"]] == [
        (["ann", "apple"], False), (["ann"], True), (["apple"], False)]
    rounds = recs(out["trace"], "retrieve_round")
    assert [(r["keywords"], r["speaker_only"], r["cap_truncated"]) for r in rounds] == [
        (["ann", "apple"], False, True), (["ann"], True, True)]
    assert round_kinds(out) == {"mg_rounds": 2, "mg_speaker_only_rounds": 1, "mg_cap_truncated_rounds": 2,
                                "mg_filled_turns": 0, "mg_ungrounded_sufficient_rounds": 0}


def test_speaker_groups_last_gives_the_round_to_the_content_keyword(ann_data: str) -> None:
    out, state = ask(ann_data)  # the default
    assert [g["keywords"] for g in state["mg_pyramid"]] == [["ann", "apple"], ["apple"], ["ann"]]
    rounds = recs(out["trace"], "retrieve_round")
    assert [r["keywords"] for r in rounds] == [["ann", "apple"], ["apple"]]
    assert set(rounds[1]["new_ids"]) <= {"D1:1", "D1:2", "D1:3", "D1:4", "D1:5"}  # apple turns, not any of Ann's
    assert round_kinds(out)["mg_speaker_only_rounds"] == 0
    assert recs(out["trace"], "build_pyramid")[0]["speaker_only_groups"] == 1


def test_uncapped_round_is_not_marked_truncated(ann_data: str) -> None:
    ctx = AllMethodsContext(data_dir=ann_data, chat_model=main_model(True), aux_chat_model=aux_model(["apple", "cherry"]), **SPEC)
    out, _ = run_graph(graph, ctx, "ns", Q)
    assert round_kinds(out) == {"mg_rounds": 1, "mg_speaker_only_rounds": 0, "mg_cap_truncated_rounds": 0,
                                "mg_filled_turns": 0, "mg_ungrounded_sufficient_rounds": 0}


def _row(method: str, rounds: int | None, speaker: int | None, capped: int | None,
         filled: int | None = None, ungrounded: int | None = None) -> dict[str, Any]:
    return {"method": method, "category": 1, "judge_score": None, "wall_time_s": 1.0, "locomo_f1": 0.5,
            "locomo_f1_r3": 0.5, "prompt_tokens": 1, "completion_tokens": 1, "mg_rounds": rounds,
            "mg_speaker_only_rounds": speaker, "mg_cap_truncated_rounds": capped, "mg_filled_turns": filled,
            "mg_ungrounded_sufficient_rounds": ungrounded}


def test_eval_summary_counts_speaker_only_and_capped_rounds() -> None:
    mg = summarize_method([_row("mgretrieval", 3, 1, 2, 7, 1), _row("mgretrieval", 1, 1, 0, 5, 0)], [1])
    assert mg["keyword_rounds"] == {"rounds": 4, "speaker_only": 2, "cap_truncated": 2, "filled_turns": 12,
                                    "ungrounded_sufficient": 1}
    line = _keyword_round_lines(mg)[0]
    assert "4" in line and "speaker-only groups 2 (50.00 %)" in line and "per-round cap 2 (50.00 %)" in line
    assert "ungrounded 1 (25.00 %)" in line and "dense fill 12" in line
    old = summarize_method([_row("mgretrieval", 2, 0, 1)], [1])  # a row written before these counts existed
    assert old["keyword_rounds"]["filled_turns"] == 0 and old["keyword_rounds"]["ungrounded_sufficient"] == 0
    rag = summarize_method([_row("rag", None, None, None)], [1])
    assert "keyword_rounds" not in rag and _keyword_round_lines(rag) == []
