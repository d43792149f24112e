"""What HyMem's light call can show of the gold turns within its memory budget, no model (issue 35,
`hymem_light_turn_tokens`).

    python benchmarks/hymem_light_memory.py --memory ~/.cache/recollect/eval_memory/hymem-<fp> \
        [--data /work/shared/data/locomo/locomo_dev.json] [--out benchmarks/reports/hymem_light_memory]

`--memory` is a HyMem eval memory (its Level-1 summaries and the stored turns of `locomo-<conversation>`). The
questions are the decisive eval's (both dev conversations, categories 1-4, the stratified 120 with seed 0,
those with gold turns). Per way of filling the light prompt, the mean share of a question's gold turns whose
words the prompt holds, the tokens of its memory section, and how many turns it shows:

- `summaries`: the spec, the top `hymem_light_k` (30) summaries; their linked turns are counted apart, since
  the prompt holds the summary's words, not the turns';
- `summary_turns`: the raw turns of the best-ranked summaries, each turn once, within the budget;
- `turns`: the turns ranked by cosine and BM25 fused, grouped by session, within the budget (the setting's).

The report holds ids and numbers only (the LoCoMo text is read at run time and never written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from recollect.eval.questions import build_question_set, stratified_sample  # noqa: E402
from recollect.graphs.hymem.common import summary_line, top_summaries, turns_of  # noqa: E402
from recollect.graphs.hymem.light_turns import turn_memory  # noqa: E402
from recollect.graphs.hymem.memory import turn_line  # noqa: E402
from recollect.graphs.hymem.settings import HyMemContext  # noqa: E402
from recollect.llm.usage import estimate_tokens  # noqa: E402
from recollect.memory.vectors import Unit  # noqa: E402
from recollect.steps import workspace  # noqa: E402


def summary_turns(units: list[Unit], turns: dict[str, Any], budget: int) -> tuple[list[str], int]:
    """The raw turns of the units in rank order, each once, while they fit (the first unit always)."""
    shown: list[str] = []
    used = 0
    for unit in units:
        new = [t for t in unit.turn_ids if t in turns and t not in shown]
        cost = sum(estimate_tokens(f"  {turn_line(turns[t])}") for t in new)
        if used + cost > budget and shown:
            break
        shown += new
        used += cost
    return shown, used


def measure(memory: str, data: str, budget: int, k: int) -> dict[str, Any]:
    qset = build_question_set(data, categories=(1, 2, 3, 4), conversations=["conv-26", "conv-30"])
    questions = [q for q in stratified_sample(qset.questions, 120, seed=0) if q.evidence_ids]
    ctx = HyMemContext(data_dir=memory, hymem_light_k=k)
    ws = workspace(ctx)
    rows: dict[str, list[tuple[float, int, int]]] = {"summaries": [], "summary_turns": [], "turns": []}
    linked: list[float] = []
    for q in questions:
        ns = f"locomo-{q.sample_id}"
        gold = set(q.evidence_ids)
        turns = ws.turns(ns)
        units = top_summaries(ctx, ns, q.question, k)
        words = {t for u in units if len(u.turn_ids) == 1 and u.text == turn_line(turns[u.turn_ids[0]])
                 for t in u.turn_ids}  # turn-line units: the prompt holds those turns' words
        rows["summaries"].append((len(gold & words) / len(gold),
                                  sum(estimate_tokens(summary_line(u)) for u in units), len(words)))
        linked.append(len(gold & set(turns_of(units))) / len(gold))
        shown, used = summary_turns(units, turns, budget)
        rows["summary_turns"].append((len(gold & set(shown)) / len(gold), used, len(shown)))
        mem = turn_memory(ws, ns, q.question, budget)
        rows["turns"].append((len(gold & set(mem.shown)) / len(gold),
                              sum(estimate_tokens(line) for line in mem.lines), len(mem.shown)))
    table = {name: {"gold_turns_shown_percent": round(100 * mean(r[0] for r in v), 1),
                    "memory_tokens": round(mean(r[1] for r in v)), "turns_shown": round(mean(r[2] for r in v), 1)}
             for name, v in rows.items()}
    table["summaries"]["gold_turns_linked_percent"] = round(100 * mean(linked), 1)
    return {"questions": len(questions), "budget_tokens": budget, "light_k": k, "ways": table}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory", required=True, help="a HyMem eval memory's data directory")
    ap.add_argument("--data", default="/work/shared/data/locomo/locomo_dev.json")
    ap.add_argument("--budget", type=int, default=1280, help="memory tokens (rag's answer prompt: 5 x 256)")
    ap.add_argument("--light-k", type=int, default=30)
    ap.add_argument("--out", default="benchmarks/reports/hymem_light_memory")
    args = ap.parse_args()
    result = measure(args.memory, args.data, args.budget, args.light_k)
    command = f"python benchmarks/hymem_light_memory.py --memory {Path(args.memory).name}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"command": command, **result}, indent=2) + "\n")
    ways = result["ways"]
    lines = ["# What HyMem's light prompt holds of the gold turns (no model)", "",
             f"`{command}` (the eval memory's folder under ~/.cache/recollect/eval_memory), {result['questions']} "
             f"questions of the decisive sample with gold turns; budget {result['budget_tokens']} tokens of memory "
             "(rag's answer prompt: 5 chunks of 256).", "",
             "| light prompt | gold turns whose words it holds (%) | memory tokens | turns shown |", "|---|---|---|---|",
             f"| summaries (the spec, top {result['light_k']}) | {ways['summaries']['gold_turns_shown_percent']} (their "
             f"links reach {ways['summaries']['gold_turns_linked_percent']}) | {ways['summaries']['memory_tokens']} | "
             f"{ways['summaries']['turns_shown']} (turn-line units) |",
             f"| the best summaries' raw turns | {ways['summary_turns']['gold_turns_shown_percent']} | "
             f"{ways['summary_turns']['memory_tokens']} | {ways['summary_turns']['turns_shown']} |",
             f"| the best turns by session (`hymem_light_turn_tokens`) | {ways['turns']['gold_turns_shown_percent']} | "
             f"{ways['turns']['memory_tokens']} | {ways['turns']['turns_shown']} |"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
