"""How many of the gold turns the n best-ranked turns hold, by cosine alone and by cosine and BM25 ranks
fused: the question's whole conversation ranked at once, no model call (issue 35, `mg_turn_ranking`).

    python benchmarks/turn_ranking_recall.py --memory ~/.cache/recollect/eval_memory/mgretrieval-<fp> \
        [--data /work/shared/data/locomo/locomo_dev.json] [--out benchmarks/reports/turn_ranking]

`--memory` is a data directory whose namespaces `locomo-<conversation>` hold the conversation's turns (any
builder's eval memory: every builder writes the shared `turns` collection). The questions are the decisive
eval's: both dev conversations, categories 1-4, the stratified sample of 120 with seed 0; those without gold
turns are left out. The ranking is `recollect.memory.turn_ranking`'s (exact cosine over the stored turn
vectors; `hybrid` fuses it with the shared turn corpus's BM25 ranking), so MGRetrieval's dense rounds and
fill and HyMem's turn ranking pick what this counts. The report holds ids and numbers only (the LoCoMo text
is read at run time and never written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from recollect.eval.questions import build_question_set, stratified_sample  # noqa: E402
from recollect.memory.turn_ranking import TurnRanking, top_by_similarity  # noqa: E402
from recollect.memory.workspace import Workspace  # noqa: E402

DEPTHS = (10, 20, 30)
RANKINGS: tuple[TurnRanking, ...] = ("cosine", "hybrid")


def recall_table(ws: Workspace, questions: list[Any]) -> dict[str, Any]:
    """Mean share of a question's gold turns among its n best-ranked turns, per ranking and n."""
    hits: dict[str, list[float]] = {f"{r}@{n}": [] for r in RANKINGS for n in DEPTHS}
    for q in questions:
        ns = f"locomo-{q.sample_id}"
        ids = list(ws.turns(ns))
        gold = set(q.evidence_ids)
        for ranking in RANKINGS:
            for n in DEPTHS:  # a hybrid ranking fuses max(HYBRID_POOL, n) of each: ranked per n
                ranked = top_by_similarity(ws, ns, q.question, ids, n, ranking)
                hits[f"{ranking}@{n}"].append(len(gold & set(ranked)) / len(gold))
    return {k: round(100 * sum(v) / len(v), 1) for k, v in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory", required=True, help="a built memory's data directory")
    ap.add_argument("--data", default="/work/shared/data/locomo/locomo_dev.json")
    ap.add_argument("--out", default="benchmarks/reports/turn_ranking")
    args = ap.parse_args()
    qset = build_question_set(args.data, categories=(1, 2, 3, 4), conversations=["conv-26", "conv-30"])
    questions = [q for q in stratified_sample(qset.questions, 120, seed=0) if q.evidence_ids]
    ws = Workspace(args.memory)
    table = recall_table(ws, questions)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = f"python benchmarks/turn_ranking_recall.py --memory {Path(args.memory).name}"
    (out / "summary.json").write_text(json.dumps(
        {"command": command, "questions": len(questions), "recall_percent": table}, indent=2) + "\n")
    lines = ["# Gold turns among the best-ranked turns (no model)", "",
             f"`{command}` (the eval memory's folder under ~/.cache/recollect/eval_memory), {len(questions)} "
             "questions of the decisive sample with gold turns. Mean share of a question's gold turns (%) among "
             "the n turns of its conversation ranked first.", "",
             "| ranking | " + " | ".join(f"n = {n}" for n in DEPTHS) + " |",
             "|---|" + "---|" * len(DEPTHS)]
    for ranking in RANKINGS:
        lines.append(f"| {ranking} | " + " | ".join(f"{table[f'{ranking}@{n}']}" for n in DEPTHS) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
