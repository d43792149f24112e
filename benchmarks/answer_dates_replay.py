"""What `answer_absolute_dates` does to an eval run made without it, with no LLM call.

    python benchmarks/answer_dates_replay.py runs/x_memr3_old --data-dir runs/eval_dev_data
    python benchmarks/answer_dates_replay.py runs/eval_dev_old runs/eval_dev_new --data-dir ... --check runs/eval_dev_new

The date step is deterministic: it reads the answer, the cited turns, the turns the graph showed the
model and their session dates. Each row of a run folder's `per_question.jsonl` has all of them
(`prediction`, `supports`, `retrieved_turn_ids`), so the step can be replayed on any earlier run through
the graphs' own code (`recollect.answer_dates.absolute_answer_dates`) and re-scored. This measures the step on
runs that cannot be re-made (an earlier runtime), and `--check RUN` confirms that a run made with the
step gives exactly the replayed answers of a run made without it (same model replies, nothing else
changed). It prints a markdown table: LoCoMo-F1 per method before and after, and every changed answer's
old and new form (dataset text: keep its output under runs/).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load_rows(run: Path) -> tuple[list[dict[str, Any]], int | None]:
    rows = [json.loads(line) for line in (run / "per_question.jsonl").read_text().splitlines() if line.strip()]
    config = json.loads((run / "run_config.json").read_text())
    return rows, config.get("max_sessions")


def replay(rows: list[dict[str, Any]], max_sessions: int | None, data_dir: str) -> list[dict[str, Any]]:
    """Each row with `replayed` (the answer after the date step) and `replayed_f1`."""
    from recollect.answer_dates import absolute_answer_dates
    from recollect.eval.metrics import score_prediction
    from recollect.eval.plan import namespace_for
    from recollect.graphs.registry import AllMethodsContext
    from recollect.steps import is_no_info

    ctx = AllMethodsContext(data_dir=data_dir)
    out = []
    for row in rows:
        answer = row["prediction"]
        if not is_no_info(answer):
            state = {"namespace": namespace_for(row["sample_id"], max_sessions), "supports": row["supports"],
                     "trace": [{"node": "replay", "shown_turn_ids": row["retrieved_turn_ids"]}]}
            answer, _ = absolute_answer_dates(ctx, state, answer)  # type: ignore[arg-type]
        f1 = score_prediction(answer, row["gold"], row["category"])["locomo_f1"]
        out.append({**row, "replayed": answer, "replayed_f1": f1})
    return out


def table(name: str, rows: list[dict[str, Any]]) -> str:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[r["method"]].append(r)
    lines = [f"## {name}", "", "| method | n | LoCoMo-F1 before | after | answers changed |", "|---|---|---|---|---|"]
    for method, rs in by.items():
        before = 100 * sum(r["locomo_f1"] for r in rs) / len(rs)
        after = 100 * sum(r["replayed_f1"] for r in rs) / len(rs)
        changed = sum(r["replayed"] != r["prediction"] for r in rs)
        lines.append(f"| {method} | {len(rs)} | {before:.2f} | {after:.2f} | {changed} |")
    lines += ["", "| method | question | answer | after the date step | F1 |", "|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['question_id']} | {r['prediction']} | {r['replayed']} | "
              f"{r['locomo_f1']:.2f} → {r['replayed_f1']:.2f} |" for r in rows if r["replayed"] != r["prediction"]]
    return "\n".join(lines)


def check(replayed: list[dict[str, Any]], made_with: list[dict[str, Any]]) -> str:
    """Rows of a run made with the step against the replayed answers of one made without it."""
    made = {(r["method"], r["question_id"]): r["prediction"] for r in made_with}
    pairs = [(r, made[(r["method"], r["question_id"])]) for r in replayed if (r["method"], r["question_id"]) in made]
    differ = [(r, p) for r, p in pairs if p != r["replayed"]]
    lines = [f"## check: {len(pairs) - len(differ)} of {len(pairs)} answers equal the replay", ""]
    lines += [f"- {r['method']} {r['question_id']}: replayed {r['replayed']!r}, run gave {p!r}" for r, p in differ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders made without the date step")
    parser.add_argument("--data-dir", required=True, help="the data dir the runs read (its turn store)")
    parser.add_argument("--check", type=Path, help="a run folder made with the step, to compare against")
    args = parser.parse_args(argv)
    for run in args.runs:
        rows, max_sessions = load_rows(run)
        replayed = replay(rows, max_sessions, args.data_dir)
        print(table(str(run), replayed), end="\n\n")
        if args.check:
            print(check(replayed, load_rows(args.check)[0]), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
