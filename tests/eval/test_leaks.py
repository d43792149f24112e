"""benchmarks/leaks.py: the funnel per graph and category from the decisive rows, and its largest leak."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import leaks


def _row(method: str, qid: str, cat: int, f1: float, stages: tuple[float, float, float, float] | None,
         fp: str = "cur") -> dict[str, Any]:
    row: dict[str, Any] = {"method": method, "question_id": qid, "category": cat, "locomo_f1": f1, "fingerprint": fp}
    row.update(dict(zip(leaks.STAGES, stages or (None,) * 4, strict=True)))
    return row


def test_leaks_are_the_points_lost_at_each_stage_never_below_zero() -> None:
    assert leaks.leaks({"evidence_in_memory": 80.0, "evidence_retrieved": 90.0, "evidence_shown": 60.0,
                        "evidence_cited": 50.0}) == {"memory": 20.0, "retrieval": 0.0, "packing": 30.0, "answer": 10.0}


def test_report_uses_current_rows_on_rags_questions_and_names_the_largest_leak() -> None:
    ledger = [
        _row("rag", "q1", 2, 1.0, (1, 1, 1, 1)), _row("rag", "q2", 2, 0.5, (1, 1, 1, 0)),
        _row("rag", "q3", 4, 0.0, (1, 0, 0, 0)),
        _row("hymem", "q1", 2, 0.5, (1, 0.5, 0.5, 0.5)), _row("hymem", "q2", 2, 0.0, (1, 0, 0, 0)),
        _row("hymem", "q3", 4, 1.0, None),                  # no gold turns: F1 counts, the funnel does not
        _row("hymem", "q4", 4, 1.0, (1, 1, 1, 1)),          # rag never answered it: left out
        _row("hymem", "q1", 2, 0.0, (0, 0, 0, 0), fp="old"),  # a stale fingerprint: left out
    ]
    result = leaks.report(ledger, {"rag": frozenset({"cur"}), "hymem": frozenset({"cur"})})
    temporal = result["hymem"]["categories"]["temporal"]
    assert temporal["questions"] == 2 and temporal["f1"] == 25.0
    assert temporal["funnel"] == {"evidence_in_memory": 100.0, "evidence_retrieved": 25.0, "evidence_shown": 25.0,
                                  "evidence_cited": 25.0}
    assert temporal["largest_leak"] == "retrieval" and temporal["leaks"]["retrieval"] == 75.0
    assert temporal["vs_rag"]["mean"] == pytest.approx(-50.0)
    every = result["hymem"]["categories"]["all 1-4"]
    assert every["questions"] == 3 and every["funnel"]["evidence_retrieved"] == 25.0
    assert "single-hop" in result["hymem"]["categories"] and "vs_rag" not in result["rag"]["categories"]["temporal"]
    assert result["rag"]["categories"]["temporal"]["largest_leak"] == "answer"
    lines = leaks.markdown(result, "cmd")
    assert any(line.startswith("| hymem | temporal | 2 | 25.0 | -50.0 [") and line.endswith("| retrieval (75.0) |")
               for line in lines)
