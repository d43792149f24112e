"""`recollect score` tests: order, null Mem0/BLEU for category 5, stdin, and malformed lines → exit 2."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from recollect.eval.score import run_score


def _run(path: str) -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run_score(path, out=out, err=err)
    return rc, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


ROWS = [
    {"prediction": "In 2022", "gold": 2022, "category": 2, "question_id": "x#1"},
    {"prediction": "Not mentioned in the conversation", "gold": "Yes", "category": 5},
    {"prediction": "camping and painting", "gold": "pottery, camping, painting", "category": 1},
    {"prediction": "line one\nline two \u201cquoted\u201d", "gold": "line", "category": 4},
    {"prediction": "", "gold": "7 May 2023", "category": 3},
]


def test_scores_in_input_order(tmp_path: Path) -> None:
    rc, rows, err = _run(_write(tmp_path, [json.dumps(r) for r in ROWS]))
    assert rc == 0 and err == ""
    assert [r["line"] for r in rows] == [1, 2, 3, 4, 5]
    assert all(set(r) == {"line", "locomo_f1", "locomo_f1_r3", "mem0_f1", "bleu1"} for r in rows)
    assert rows[0]["locomo_f1_r3"] == 0.667 and rows[0]["mem0_f1"] == pytest.approx(2 / 3)
    assert rows[1] == {"line": 2, "locomo_f1": 1.0, "locomo_f1_r3": 1.0, "mem0_f1": None, "bleu1": None}
    assert rows[2]["locomo_f1_r3"] == 0.444
    assert rows[4]["locomo_f1"] == 0.0 and rows[4]["bleu1"] == 0.0


def test_blank_lines_are_skipped_but_numbered(tmp_path: Path) -> None:
    rc, rows, _ = _run(_write(tmp_path, [json.dumps(ROWS[0]), "", json.dumps(ROWS[1])]))
    assert rc == 0 and [r["line"] for r in rows] == [1, 3]


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"gold": "x", "category": 1}), "prediction"),
        (json.dumps({"prediction": "x", "category": 1}), "gold"),
        (json.dumps({"prediction": "x", "gold": "x"}), "category"),
        (json.dumps({"prediction": "x", "gold": "x", "category": 6}), "category"),
        (json.dumps({"prediction": "x", "gold": "x", "category": "2"}), "category"),
        (json.dumps({"prediction": "x", "gold": "x", "category": True}), "category"),
        (json.dumps({"prediction": 3, "gold": "x", "category": 2}), "prediction"),
        (json.dumps({"prediction": "x", "gold": None, "category": 2}), "gold"),
        (json.dumps(["x", "y", 1]), "JSON object"),
    ],
)
def test_malformed_line_exits_2_naming_line(tmp_path: Path, bad: str, needle: str) -> None:
    rc, rows, err = _run(_write(tmp_path, [json.dumps(ROWS[0]), json.dumps(ROWS[1]), bad]))
    assert rc == 2
    assert rows == []  # nothing is written when the input is malformed
    assert "line 3" in err and needle in err


def test_missing_file(tmp_path: Path) -> None:
    rc, rows, err = _run(str(tmp_path / "absent.jsonl"))
    assert rc == 2 and rows == [] and err == f"error: {tmp_path / 'absent.jsonl'}: file not found\n"


def test_a_directory_is_one_error_line(tmp_path: Path) -> None:
    rc, rows, err = _run(str(tmp_path))
    assert rc == 2 and rows == [] and err.startswith(f"error: {tmp_path}: cannot read") and err.count("\n") == 1


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(ROWS[0]) + "\n"))
    rc, rows, _ = _run("-")
    assert rc == 0 and rows[0]["line"] == 1 and rows[0]["locomo_f1_r3"] == 0.667
