"""benchmarks/speed_report.py's arithmetic: the means per question, the split of the seconds, × rag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import speed_report
from recollect.eval.ledger import append_ledger


def _row(method: str, qid: str, *, wall: float, llm: float, prefill: float, decode: float, retrieval: float,
         prompt: int, cached: int, calls: int = 1, timed: int = 1) -> dict[str, Any]:
    return {"method": method, "question_id": qid, "fingerprint": f"fp-{method}", "wall_time_s": wall, "llm_s": llm,
            "prefill_s": prefill, "decode_s": decode, "retrieval_s": retrieval, "prompt_tokens": prompt,
            "cached_tokens": cached, "prompt_tokens_computed": prompt - cached, "completion_tokens": 10,
            "n_llm_calls": calls, "timed_calls": timed, "locomo_f1": 0.5, "provenance": {"llama_cpp": "b1"}}


def test_the_report_splits_each_graphs_seconds_and_compares_with_rag(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    for qid in ("conv-26#1", "conv-30#2"):
        append_ledger(rows, _row("rag", qid, wall=10, llm=8, prefill=5, decode=2, retrieval=1, prompt=1000, cached=0))
        append_ledger(rows, _row("memr3", qid, wall=30, llm=26, prefill=15, decode=8, retrieval=2, prompt=3000,
                                 cached=1000, calls=3, timed=2))
    (tmp_path / "limits.json").write_text(json.dumps({"prefill_tps": 90.0, "decode_tps": 16.0}))
    build = tmp_path / "build" / "eval"
    build.mkdir(parents=True)
    built = {"method": "mragent", "sessions": 2, "seconds": 100.0, "llm_calls": 2, "prompt_tokens": 3000,
             "completion_tokens": 800, "prefill_s": 30.0, "decode_s": 50.0, "fallbacks": ["one"]}
    (build / "summary.json").write_text(json.dumps(
        {"metadata": {"memory_construction": {"locomo-conv-26-s2": {"built": [built, {"method": "turns"}]}}}}))

    rep = speed_report.build_report(tmp_path, "python benchmarks/speed_report.py")
    assert rep["questions"] == 2 and list(rep["graphs"]) == ["rag", "memr3"]
    memr3 = rep["graphs"]["memr3"]
    assert memr3["seconds_per_question"] == 30 and memr3["prefill_tokens_computed"] == 2000
    assert memr3["seconds"] == {"prefill": 15, "decode": 8, "model_call_other": 3, "retrieval": 2, "other": 2}
    assert (memr3["seconds_vs_rag"], memr3["prefill_vs_rag"]) == (3.0, 2.0)
    assert memr3["timed_call_share"] == round(4 / 6, 3)
    assert rep["builders"] == {"mragent": {
        "sessions": 2, "seconds_per_session": 50.0, "llm_calls_per_session": 1.0, "prompt_tokens_per_session": 1500,
        "completion_tokens_per_session": 400, "prefill_s_per_session": 15.0, "decode_s_per_session": 25.0,
        "fallbacks": 1}}

    out = tmp_path / "report"
    speed_report.write(rep, tmp_path, out)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["graphs"]["rag"]["seconds_per_question"] == 10  # the done-when's fields, as named there
    assert "| memr3 | 30.0 | 3.0 | 2000 | 2.0 |" in (out / "summary.md").read_text()
    assert sorted(p.name for p in (out / "rows").iterdir()) == ["memr3.jsonl", "rag.jsonl"]


def test_report_only_without_a_run_is_one_clear_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        speed_report.main(["--report-only", "--work", str(tmp_path / "none"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert "nothing to report" in capsys.readouterr().err
