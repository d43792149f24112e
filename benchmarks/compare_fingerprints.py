"""One graph before and after a change, from the decisive eval's rows: the paired F1 difference and the cost.

    python benchmarks/compare_fingerprints.py memr3 \
        --before "memr3_prefix_layout=false memr3_skip_forced_router=false memr3_require_tracker=false" \
        [--after ""] [--rows benchmarks/reports/eval_decisive/rows] [--out benchmarks/reports/speed/memr3_before_after]

A side is the rows of one fingerprint of the graph in the rows folder: the fingerprint this checkout's code
gives with those settings (space-separated KEY=VALUE; "" = the defaults), or a fingerprint prefix written as
`fp:<hex>` (rows of an older commit). Only the questions both sides answered count: the mean LoCoMo-F1 of each,
the paired difference after − before with its 95 % bootstrap interval (questions resampled, as the eval's
summary does), and per side the means per question of seconds, computed prompt tokens, completion tokens
and calls. Rows hold no dataset text; neither does the report. Rows made under different conditions (another
machine, work beside the eval) keep their seconds: compare seconds with care, F1 is what this is for.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import mean
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def fingerprint_for(graph: str, side: str) -> tuple[str, ...]:
    """The fingerprints a side names: `fp:<prefix>` as it is, else this checkout's with those settings (its
    digest and its earlier schemes' ones, `Fingerprint.accepted`)."""
    if side.startswith("fp:"):
        return (side[3:],)
    from recollect.cli_args import _parse_sets
    from recollect.eval.fingerprint import graph_fingerprint
    from recollect.graphs.registry import AllMethodsContext

    overrides = _parse_sets(side.split(), [graph])  # as `recollect eval --set` reads them
    ctx = AllMethodsContext().with_overrides(**overrides) if overrides else AllMethodsContext()
    return tuple(sorted(graph_fingerprint(graph, ctx).accepted))


def side_rows(rows: list[dict[str, Any]], prefixes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each question's latest row under any of the fingerprints (a prefix may name one only)."""
    for prefix in prefixes:
        fps = {r["fingerprint"] for r in rows if r["fingerprint"].startswith(prefix)}
        if len(fps) > 1:
            raise SystemExit(f"error: fingerprint prefix {prefix!r} matches {len(fps)} fingerprints; give more digits")
    return {r["question_id"]: r for r in rows if r["fingerprint"].startswith(tuple(prefixes))}


def _named(side: dict[str, dict[str, Any]], prefixes: Sequence[str]) -> str:
    """The fingerprints the side's rows have (or the prefixes asked for, when none matched)."""
    return ", ".join(sorted({r["fingerprint"] for r in side.values()}) or prefixes)


def cost(rows: list[dict[str, Any]]) -> dict[str, float]:
    def m(key: str) -> float:
        return round(mean(float(r.get(key) or 0.0) for r in rows), 2) if rows else 0.0

    return {"seconds_per_question": m("wall_time_s"), "prefill_tokens_computed": m("prompt_tokens_computed"),
            "completion_tokens": m("completion_tokens"), "llm_calls": m("n_llm_calls"),
            "evidence_shown": m("evidence_shown")}


def compare(rows: list[dict[str, Any]], before_fp: Sequence[str], after_fp: Sequence[str]) -> dict[str, Any]:
    from recollect.eval.intervals import bootstrap_mean, verdict

    before, after = side_rows(rows, before_fp), side_rows(rows, after_fp)
    shared = sorted(set(before) & set(after))
    f1b = [float(before[q].get("locomo_f1") or 0.0) for q in shared]
    f1a = [float(after[q].get("locomo_f1") or 0.0) for q in shared]
    diff = bootstrap_mean([a - b for a, b in zip(f1a, f1b, strict=True)])
    return {
        "before": {"fingerprint": _named(before, before_fp), "rows": len(before), "f1": round(100 * mean(f1b), 2) if shared else None,
                   **cost([before[q] for q in shared])},
        "after": {"fingerprint": _named(after, after_fp), "rows": len(after), "f1": round(100 * mean(f1a), 2) if shared else None,
                  **cost([after[q] for q in shared])},
        "common_questions": len(shared),
        "difference": None if diff is None else {k: round(100 * v, 2) if k != "n" else v for k, v in diff.items()},
        "verdict": verdict(diff),
    }


def markdown(graph: str, rep: dict[str, Any], command: str) -> str:
    d = rep["difference"]
    lines = [f"# {graph}: before and after, on the questions both answered", "",
             f"Made by `{command}`. {rep['common_questions']} common questions.", "",
             "| side | fingerprint | rows | F1 | s / q | computed prompt tok | completion tok | calls | evidence shown |",
             "|---|---|---|---|---|---|---|---|---|"]
    for side in ("before", "after"):
        s = rep[side]
        short = ", ".join(f[:16] for f in s["fingerprint"].split(", "))
        lines.append(f"| {side} | `{short}` | {s['rows']} | {s['f1']} | {s['seconds_per_question']} | "
                     f"{s['prefill_tokens_computed']} | {s['completion_tokens']} | {s['llm_calls']} | "
                     f"{s['evidence_shown']} |")
    lines += ["", "Paired difference after − before: " + (
        f"{d['mean']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}] F1 points ({rep['verdict']})." if d else "none (no "
        "common questions)."), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--before", required=True, help='settings ("k=v k=v") or fp:<fingerprint prefix>')
    ap.add_argument("--after", default="", help='settings ("" = the defaults) or fp:<fingerprint prefix>')
    ap.add_argument("--rows", default=str(ROOT / "benchmarks" / "reports" / "eval_decisive" / "rows"))
    ap.add_argument("--out", help="write <out>.json and <out>.md")
    a = ap.parse_args(argv)
    from recollect.eval.ledger import read_ledger

    rows = read_ledger(Path(a.rows), [a.graph])
    if not rows:
        ap.error(f"--rows {a.rows}: no rows of {a.graph}")
    rep = compare(rows, fingerprint_for(a.graph, a.before), fingerprint_for(a.graph, a.after))
    command = "python benchmarks/compare_fingerprints.py " + " ".join(
        f'"{x}"' if " " in x or not x else x for x in (argv if argv is not None else sys.argv[1:]))
    text = markdown(a.graph, rep, command)
    print(text)
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps({"graph": a.graph, "command": command, **rep}, indent=2) + "\n")
        out.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
