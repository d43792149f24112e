"""`recollect score INPUT.jsonl`: offline lexical scoring of predictions (the eval (README "Evaluating on LoCoMo")).

Input lines carry `prediction`, `gold` (str or int) and `category` (1–5); other keys are ignored. Output
is one JSON object per input line, in input order: `line`, `locomo_f1`, `locomo_f1_r3`, `mem0_f1`, `bleu1`
(the last two null for category 5). The whole input is validated before anything is written, so a
malformed line never leaves a truncated result file behind; every bad line is reported, and the exit
status is 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from recollect.eval.metrics import score_prediction

EXIT_MALFORMED = 2
_MAX_REPORTED = 20


def _check(obj: Any) -> str | None:
    """Why a parsed line cannot be scored, or None when it can."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    missing = [k for k in ("prediction", "gold", "category") if k not in obj]
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    if obj["prediction"] is not None and not isinstance(obj["prediction"], str):
        return f"field 'prediction' must be a string, got {type(obj['prediction']).__name__}"
    gold = obj["gold"]
    if isinstance(gold, bool) or not isinstance(gold, str | int):
        return f"field 'gold' must be a string or an integer, got {type(gold).__name__}"
    cat = obj["category"]
    if isinstance(cat, bool) or not isinstance(cat, int) or cat not in (1, 2, 3, 4, 5):
        return f"field 'category' must be an integer 1-5, got {cat!r}"
    return None


def score_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """(results, errors); blank lines are skipped, line numbers are 1-based physical lines."""
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {n}: invalid JSON at column {exc.colno}: {exc.msg}")
            continue
        problem = _check(obj)
        if problem:
            errors.append(f"line {n}: {problem}")
            continue
        results.append({"line": n, **score_prediction(obj["prediction"], obj["gold"], obj["category"])})
    return results, errors


def run_score(input_path: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Score INPUT (`-` = stdin); returns the exit status (0 ok, 2 malformed or unreadable input)."""
    try:
        if input_path == "-":
            results, errors = score_lines(sys.stdin)
        else:
            with open(input_path, encoding="utf-8") as fh:
                results, errors = score_lines(fh)
    except FileNotFoundError:
        print(f"error: {input_path}: file not found", file=err)
        return EXIT_MALFORMED
    except (OSError, UnicodeDecodeError) as exc:
        # the CLI's one-line form (`error: <file>: <what>`); the exception's text, not a quote of the file
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        print(f"error: {input_path}: cannot read: {reason}", file=err)
        return EXIT_MALFORMED
    if errors:
        for message in errors[:_MAX_REPORTED]:
            print(f"error: {input_path}: {message}", file=err)
        if len(errors) > _MAX_REPORTED:
            print(f"error: {input_path}: … and {len(errors) - _MAX_REPORTED} more malformed lines", file=err)
        return EXIT_MALFORMED
    for row in results:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0
