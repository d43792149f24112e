"""benchmarks/compare_fingerprints.py: one graph's rows at two fingerprints, paired on their common questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import compare_fingerprints as cf
from recollect.eval.ledger import append_ledger


def _row(fp: str, qid: str, f1: float, wall: float) -> dict:
    return {"method": "memr3", "question_id": qid, "fingerprint": fp, "locomo_f1": f1, "wall_time_s": wall,
            "prompt_tokens_computed": 100, "completion_tokens": 10, "n_llm_calls": 2, "evidence_shown": 1.0,
            "category": 1}


def test_only_common_questions_are_paired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows"
    for qid, f1 in (("q1", 0.0), ("q2", 0.5), ("q3", 1.0)):
        append_ledger(rows, _row("aaaa1111", qid, f1, 100.0))
    for qid, f1 in (("q1", 1.0), ("q2", 0.5), ("q4", 0.0)):  # q3 only before, q4 only after
        append_ledger(rows, _row("bbbb2222", qid, f1, 50.0))
    out = tmp_path / "cmp"
    assert cf.main(["memr3", "--before", "fp:aaaa", "--after", "fp:bbbb", "--rows", str(rows), "--out", str(out)]) == 0
    text = out.with_suffix(".md").read_text()
    assert "2 common questions" in text
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["common_questions"] == 2
    assert (saved["before"]["f1"], saved["after"]["f1"]) == (25.0, 75.0)
    assert saved["difference"]["mean"] == 50.0 and saved["difference"]["n"] == 2
    assert (saved["before"]["seconds_per_question"], saved["after"]["seconds_per_question"]) == (100.0, 50.0)


def test_an_ambiguous_prefix_is_refused(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    append_ledger(rows, _row("abc1", "q1", 0.0, 1.0))
    append_ledger(rows, _row("abc2", "q1", 0.0, 1.0))
    with pytest.raises(SystemExit, match="matches 2 fingerprints"):
        cf.main(["memr3", "--before", "fp:abc", "--after", "fp:abc1", "--rows", str(rows)])
