"""Where each graph loses the gold evidence, per question category, from the decisive eval's rows (issue 35).

    python benchmarks/leaks.py [--rows benchmarks/reports/eval_decisive/rows] [--out benchmarks/reports/eval_decisive/leaks]

Each graph's rows of its current fingerprint (`recollect.eval.fingerprint`, as the decisive eval and
`peers_table.py` choose them), on the questions rag answered too. Per graph and category: the evidence funnel
(`recollect.eval.funnel`: the share of the gold turns in memory, retrieved, shown, cited; questions with gold
turns), LoCoMo-F1 and its paired difference from rag on the same questions, and the **largest leak**: the stage
that lost the most gold turns, of

- `memory`: never held by the method's memory (100 - in memory);
- `retrieval`: held, but no retrieval step reached it (in memory - retrieved);
- `packing`: retrieved, but the prompt budget dropped it (retrieved - shown);
- `answer`: shown, but the answer does not rest on it (shown - cited).

A fallback may retrieve what the memory does not hold (retrieved > in memory); a stage's loss is never below 0.
Rows hold ids and numbers only, and so does the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from recollect.eval.fingerprint import graph_fingerprint  # noqa: E402
from recollect.eval.intervals import paired_difference  # noqa: E402
from recollect.eval.ledger import one_per_question, read_ledger  # noqa: E402
from recollect.graphs.registry import AllMethodsContext  # noqa: E402

GRAPHS = ("rag", "full_context", "hymem", "mgretrieval", "memr3", "mragent")
CATEGORIES = {0: "all 1-4", 1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
STAGES = ("evidence_in_memory", "evidence_retrieved", "evidence_shown", "evidence_cited")
LEAKS = ("memory", "retrieval", "packing", "answer")


def leaks(funnel: dict[str, float]) -> dict[str, float]:
    """Gold-turn percentage points lost at each stage (never below 0)."""
    held, got, shown, cited = (funnel[s] for s in STAGES)
    return {"memory": max(100.0 - held, 0.0), "retrieval": max(held - got, 0.0),
            "packing": max(got - shown, 0.0), "answer": max(shown - cited, 0.0)}


def funnel_of(rows: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """Mean stage shares (%) over the rows with gold turns."""
    with_gold = [r for r in rows if all(isinstance(r.get(s), int | float) for s in STAGES)]
    if not with_gold:
        return None
    return {s: round(100 * mean(float(r[s]) for r in with_gold), 1) for s in STAGES}


def report(ledger: Sequence[dict[str, Any]], current: dict[str, frozenset[str]]) -> dict[str, Any]:
    """Per graph and category: questions, F1, paired difference from rag, funnel, leaks and the largest."""
    chosen = one_per_question([r for r in ledger if r["method"] in current and r["fingerprint"] in current[r["method"]]])
    rag_ids = {r["question_id"] for r in chosen if r["method"] == "rag"}
    chosen = [r for r in chosen if r["question_id"] in rag_ids]
    out: dict[str, Any] = {}
    for graph in current:
        per: dict[str, Any] = {}
        for cat, name in CATEGORIES.items():
            mine = [r for r in chosen if r["method"] == graph and (cat == 0 or r["category"] == cat)]
            if not mine:
                continue
            funnel = funnel_of(mine)
            entry: dict[str, Any] = {"questions": len(mine),
                                     "f1": round(100 * mean(float(r["locomo_f1"] or 0.0) for r in mine), 1),
                                     "funnel": funnel}
            if graph != "rag":
                ids = {r["question_id"] for r in mine}
                diff = paired_difference([r for r in chosen if r["question_id"] in ids], graph, "rag",
                                         (1, 2, 3, 4) if cat == 0 else (cat,))
                entry["vs_rag"] = None if diff is None else {k: round(100 * diff[k], 1) for k in ("mean", "lo", "hi")}
            if funnel is not None:
                lost = leaks(funnel)
                entry["leaks"] = {k: round(v, 1) for k, v in lost.items()}
                entry["largest_leak"] = max(LEAKS, key=lambda k: (lost[k], -LEAKS.index(k)))
            per[name] = entry
        if per:
            out[graph] = {"fingerprint": sorted({r["fingerprint"] for r in chosen if r["method"] == graph}),
                          "categories": per}
    return out


def markdown(result: dict[str, Any], command: str) -> list[str]:
    lines = ["# Where each graph loses the gold evidence (decisive rows, current fingerprints)", "",
             f"Made by `{command}`. Each graph's rows of its current fingerprint, on the questions rag answered "
             "too; funnel shares are % of the gold turns (questions with gold turns); leaks are the points lost "
             "at each stage; Δ is the paired LoCoMo-F1 difference from rag on the same questions [95 % CI].", "",
             "| graph | category | n | F1 | Δ vs rag | in memory | retrieved | shown | cited | largest leak |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for graph, g in result.items():
        for name, e in g["categories"].items():
            d = e.get("vs_rag")
            delta = "–" if graph == "rag" or d is None else f"{d['mean']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}]"
            f = e["funnel"] or {}
            cells = [f"{f[s]:.1f}" if s in f else "–" for s in STAGES]
            leak = f"{e['largest_leak']} ({e['leaks'][e['largest_leak']]:.1f})" if "largest_leak" in e else "–"
            lines.append(f"| {graph} | {name} | {e['questions']} | {e['f1']:.1f} | {delta} | " + " | ".join(cells)
                         + f" | {leak} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="benchmarks/reports/eval_decisive/rows")
    ap.add_argument("--out", default="benchmarks/reports/eval_decisive/leaks")
    args = ap.parse_args(argv)
    ctx = AllMethodsContext()
    current = {g: graph_fingerprint(g, ctx).accepted for g in GRAPHS}
    result = report(read_ledger(Path(args.rows)), current)
    command = f"python benchmarks/leaks.py --rows {args.rows} --out {args.out}"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps({"command": command, "graphs": result}, indent=2) + "\n")
    md = markdown(result, command)
    Path(f"{args.out}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
