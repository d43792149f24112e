"""Intervals that decide comparisons, a stratified question sample, and rows that say where they came from."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from recollect.eval.intervals import bootstrap_mean, intervals, intervals_markdown, paired_difference, verdict
from recollect.eval.questions import Question, stratified_sample
from tests.eval.test_eval_runner import model, rows_of, run


def _row(method: str, qid: str, f1: float, category: int = 1, wall: float = 1.0) -> dict:
    return {"method": method, "question_id": qid, "locomo_f1": f1, "category": category, "wall_time_s": wall}


def test_bootstrap_interval_holds_the_mean_and_is_reproducible() -> None:
    values = [0.0, 1.0] * 50
    a, b = bootstrap_mean(values), bootstrap_mean(values)
    assert a == b and a["mean"] == 0.5 and a["lo"] < 0.5 < a["hi"] and a["n"] == 100
    assert bootstrap_mean([]) is None
    assert bootstrap_mean([0.7] * 10) == {"mean": 0.7, "lo": pytest.approx(0.7), "hi": pytest.approx(0.7), "n": 10}


def test_paired_difference_uses_shared_questions_and_decides_only_outside_zero() -> None:
    rows = [_row("rag", f"q{i}", 0.5) for i in range(40)] + [_row("memr3", f"q{i}", 0.5 + 0.01 * (i % 3 + 1))
                                                              for i in range(40)]
    rows.append(_row("memr3", "only-here", 0.0))  # rag never answered it: not paired
    diff = paired_difference(rows, "memr3", "rag", [1])
    assert diff["n"] == 40 and diff["lo"] > 0 and verdict(diff) == "better"
    noisy = [_row("rag", f"q{i}", float(i % 2)) for i in range(10)] + [_row("hymem", f"q{i}", float((i + 1) % 2))
                                                                      for i in range(10)]
    assert verdict(paired_difference(noisy, "hymem", "rag", [1])) == "no difference shown"


def test_intervals_table_per_method_and_category() -> None:
    rows = [_row("rag", f"q{i}", 1.0, category=1 + i % 2, wall=2.0) for i in range(20)]
    rows += [_row("mragent", f"q{i}", 0.0, category=1 + i % 2, wall=8.0) for i in range(20)]
    iv = intervals(rows, ["rag", "mragent"])
    m = iv["methods"]["mragent"]
    assert m["scopes"]["overall"]["verdict"] == "worse" and m["seconds_per_question"] == 8.0
    assert set(m["scopes"]) == {"overall", "1", "2"} and iv["methods"]["rag"]["scopes"]["overall"]["vs_baseline"] is None
    md = "\n".join(intervals_markdown(iv))
    assert "paired Δ vs rag" in md and "| mragent | overall (1-4) | 20 | 0.0 [0.0, 0.0] | -100.0 [-100.0, -100.0] | worse |" in md


def _q(i: int, category: int) -> Question:
    return Question(id=f"c#{i}", sample_id="c", position=i, question=f"q{i}?", gold="x", gold_raw="x",
                    category=category, category_name=str(category), evidence_raw=(), evidence_ids=(),
                    evidence_dropped=())


def test_stratified_sample_keeps_category_shares_fixed_by_the_seed() -> None:
    questions = [_q(i, 1 + (i % 10 >= 6) + (i % 10 >= 9)) for i in range(200)]  # shares 60 % / 30 % / 10 %
    sample = stratified_sample(questions, 50, seed=3)
    assert len(sample) == 50 and Counter(q.category for q in sample) == {1: 30, 2: 15, 3: 5}
    assert sample == stratified_sample(questions, 50, seed=3) != stratified_sample(questions, 50, seed=4)
    assert [q.position for q in sample] == sorted(q.position for q in sample)  # file order
    assert stratified_sample(questions, 500) == questions


def test_a_sampled_run_reports_intervals_plot_and_provenance(tmp_path: Path) -> None:
    out = run(str(tmp_path / "data"), tmp_path / "out", model(), methods=["rag", "full_context"], sample=3, seed=1)
    rows = rows_of(out)
    assert len({r["question_id"] for r in rows}) == 3
    assert all(r["code_commit"] and len(r["settings_id"]) == 12 for r in rows)
    doc = json.loads((out / "summary.json").read_text())
    assert doc["metadata"]["stratified_sample"] == {"n": 3, "seed": 1}
    assert doc["intervals"]["baseline"] == "rag" and "full_context" in doc["intervals"]["methods"]
    md = (out / "summary.md").read_text()
    assert "## Intervals" in md and "rows by the code and settings that made them" in md
    assert (out / "accuracy_vs_seconds.png").stat().st_size > 0


def test_a_limit_takes_the_head_of_each_conversation_in_the_sample(tmp_path: Path) -> None:
    from recollect.eval.plan import plan_run
    from tests.eval.test_eval_runner import FIXTURE

    first = json.loads(FIXTURE.read_text())[0]
    second = {**json.loads(json.dumps(first)), "sample_id": "conv-e2"}
    data = tmp_path / "two.json"
    data.write_text(json.dumps([first, second]), encoding="utf-8")
    whole = plan_run(data, methods=["rag"], sample=6, seed=0).questions
    head = plan_run(data, methods=["rag"], sample=6, seed=0, limit=2).questions
    assert len(whole) == 6 and {q.sample_id for q in whole} == {"conv-e1", "conv-e2"}
    # the speed report's questions are rows of the decisive run: the first N of each conversation's share
    assert [q.id for q in head] == [q.id for c in ("conv-e1", "conv-e2")
                                    for q in [x for x in whole if x.sample_id == c][:2]]
