"""The gold turns a method's final answer call would show with a wider pool, replayed with no model (issue 35).

    python benchmarks/final_pool_replay.py --graph mragent --fingerprint 5d56a526 \
        --memory ~/.cache/recollect/eval_memory/mragent-<fp> [--budget 1280] \
        [--rows benchmarks/reports/eval_decisive/rows] [--data /work/shared/data/locomo/locomo_dev.json] \
        [--out benchmarks/reports/eval_decisive/final_pool_mragent]

For each decisive row of the graph at that fingerprint (and rag's row of the question, at rag's newest
fingerprint), the final answer call's packing (`recollect.turn_answer.turns_for_answer` itself: the pool ranked for
the question, cosine and BM25 fused, within `--budget` tokens of turn lines) is replayed over the row's
`retrieved_turn_ids` (the turns the method looked at) and over wider pools:

- `pool`: the row's turns alone; where the row's shown turns are the final call's (MRAgent), this reproduces
  its `evidence_shown`, which checks the replay;
- `pool + neighbours N`: with the turns up to N places before and after each, in its session
  (`recollect.turn_answer.with_neighbours`);
- `pool + ranked 16`: with the conversation's 16 turns ranked first for the question;
- `pool + ranked 16 + neighbours 1`.

The draft's citations, which the call reads first, are not in the rows, so no turn leads here. `--memory` is any
eval memory of the question's conversations (every builder stores the same turns). Reported: the mean share of
the gold turns shown (%), overall and per category, beside rag's on the same questions. The LoCoMo file
(CC BY-NC) is read at run time; the report holds ids and numbers only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from recollect.eval.questions import build_question_set, stratified_sample  # noqa: E402
from recollect.memory.turn_ranking import ranked_turns  # noqa: E402
from recollect.settings import Context  # noqa: E402
from recollect.steps import workspace  # noqa: E402
from recollect.turn_answer import turns_for_answer, with_neighbours  # noqa: E402


def newest_rows(rows_dir: Path, graph: str, prefix: str | None) -> dict[str, dict[str, Any]]:
    """The graph's rows at the fingerprint starting with `prefix` (None: the fingerprint of its newest row)."""
    rows = [json.loads(line) for line in (rows_dir / f"{graph}.jsonl").read_text().splitlines() if line.strip()]
    if prefix is None:
        prefix = rows[-1]["fingerprint"]
    return {r["question_id"]: r for r in rows if r["fingerprint"].startswith(prefix)}


class Replay:
    """The final call's packing over a conversation's stored turns (`ctx.data_dir`: the eval memory)."""

    def __init__(self, ctx: Context, namespace: str, question: str, budget: int) -> None:
        self.ctx, self.ns, self.question, self.budget = ctx, namespace, question, budget
        self.ws = workspace(ctx)
        self.turns = self.ws.turns(namespace)

    def neighbours(self, ids: list[str], width: int) -> list[str]:
        return with_neighbours(self.turns, ids, width)

    def ranked(self, n: int) -> list[str]:
        return ranked_turns(self.ws, self.ns, self.question, list(self.turns), n, "hybrid")

    def shown(self, pool: list[str]) -> set[str]:
        return set(turns_for_answer(self.ctx, self.ns, self.question, [], pool, self.budget)[0])


POOLS: dict[str, Callable[[Replay, list[str]], list[str]]] = {
    "pool": lambda r, pool: pool,
    "pool + neighbours 1": lambda r, pool: r.neighbours(pool, 1),
    "pool + neighbours 2": lambda r, pool: r.neighbours(pool, 2),
    "pool + ranked 16": lambda r, pool: pool + r.ranked(16),
    "pool + ranked 16 + neighbours 1": lambda r, pool: r.neighbours(pool + r.ranked(16), 1),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--fingerprint", help="a prefix of the rows' fingerprint (default: the newest row's)")
    ap.add_argument("--memory", required=True, help="an eval memory's data directory")
    ap.add_argument("--budget", type=int, default=1280)
    ap.add_argument("--rows", default="benchmarks/reports/eval_decisive/rows")
    ap.add_argument("--data", default="/work/shared/data/locomo/locomo_dev.json")
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = newest_rows(Path(a.rows), a.graph, a.fingerprint)
    rag = newest_rows(Path(a.rows), "rag", None)
    qset = build_question_set(a.data, categories=(1, 2, 3, 4), conversations=["conv-26", "conv-30"])
    questions = {q.id: q for q in stratified_sample(qset.questions, 120, seed=0)}
    ctx = Context(data_dir=os.path.expanduser(a.memory))
    shares: dict[tuple[str, str], list[float]] = {}
    for qid, row in rows.items():
        q = questions.get(qid)
        if q is None or not q.evidence_ids or qid not in rag:
            continue
        gold = set(q.evidence_ids)
        replay = Replay(ctx, f"locomo-{q.sample_id}", q.question, a.budget)
        found = {"row (evidence_shown)": row["evidence_shown"], "rag (evidence_shown)": rag[qid]["evidence_shown"]}
        for name, widen in POOLS.items():
            found[name] = len(gold & replay.shown(widen(replay, list(row["retrieved_turn_ids"])))) / len(gold)
        for name, share in found.items():
            for category in ("all 1-4", q.category_name):
                shares.setdefault((name, category), []).append(share)
    categories = list(dict.fromkeys(c for _, c in shares))
    names = list(dict.fromkeys(n for n, _ in shares))
    table = {n: {c: round(100 * mean(shares[(n, c)]), 1) for c in categories if (n, c) in shares} for n in names}
    counts = {c: len(shares[(names[0], c)]) for c in categories}
    command = (f"python benchmarks/final_pool_replay.py --graph {a.graph} --fingerprint {a.fingerprint or '(newest)'} "
               f"--memory {Path(a.memory).name} --budget {a.budget}")
    lines = [f"# {a.graph}: gold turns its final answer call would show, wider pools replayed (no model)", "",
             f"`{command}`. Rows of fingerprint {a.fingerprint or '(newest)'} with gold turns and a rag row; the "
             f"final call's packing (hybrid ranking, {a.budget} tokens of turn lines) replayed over each pool. Mean "
             "share of the gold turns shown (%).", "",
             "| pool | " + " | ".join(f"{c} (n={counts[c]})" for c in categories) + " |",
             "|---|" + "---|" * len(categories)]
    lines += [f"| {n} | " + " | ".join(str(table[n].get(c, "")) for c in categories) + " |" for n in names]
    print("\n".join(lines))
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps({"command": command, "questions": counts, "shown_percent": table},
                                                       indent=2) + "\n")
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
