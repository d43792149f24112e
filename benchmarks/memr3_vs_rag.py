"""Per-question LLM calls, tokens and latency of MemR3 against its RAG backbone, on dev-split questions.

Slice: the first `--sessions` sessions of one LoCoMo conversation and the first `--questions`
questions (categories 1, 2, 4) whose gold evidence lies inside them. The LoCoMo file is read from
`--data` at run time (CC BY-NC; never copied into the project). The model comes from the usual
settings (the embedded llama.cpp model when `RECOLLECT_LLM_BASE_URL` is empty).

    python benchmarks/memr3_vs_rag.py --data /work/shared/data/locomo/locomo_dev.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.devslice import (  # noqa: E402  (needs ROOT on sys.path)
    REPORTS,
    add_slice_args,
    command_line,
    evidence_recall,
    load_slice,
    make_workspace,
    model_label,
    write_report,
)

METHODS = ("rag", "memr3")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from recollect.eval.metrics import locomo_f1
    from recollect.graphs.registry import AllMethodsContext
    from recollect.ingestion import ingest_conversation
    from recollect.runner import ask
    from recollect.trace import shown_turn_ids

    conv, questions = load_slice(args.data, args.conv, args.sessions, args.questions, categories=(1, 2, 4))
    _, data_dir = make_workspace(None, "memr3-vs-rag-")  # MiniLM
    ctx = AllMethodsContext(data_dir=data_dir)
    ingest_conversation(conv, "bench", ctx, methods=["memr3"])
    llm = model_label(ctx, scripted=False)

    rows = []
    for q in questions:
        for method in METHODS:
            t0 = time.monotonic()
            out = ask("bench", q.question, method, ctx)
            usage = out.get("usage") or {}
            shown = set(shown_turn_ids(out.get("trace") or []))
            rows.append({
                "question_id": q.id, "category": q.category, "method": method,
                "calls": usage.get("calls", 0), "prompt_tokens": usage.get("prompt_tokens", 0),
                "completion_tokens": usage.get("completion_tokens", 0),
                "llm_latency_s": round(usage.get("latency_s", 0.0), 1),
                "wall_s": round(time.monotonic() - t0, 1),
                "iterations": out.get("iteration"),
                "locomo_f1": round(locomo_f1(out.get("answer", ""), q.gold, q.category), 3),
                "evidence_recall": round(evidence_recall(q, shown), 3),
            })
            print(json.dumps(rows[-1]), flush=True)

    summary = {}
    for method in METHODS:
        mine = [r for r in rows if r["method"] == method]
        summary[method] = {k: round(statistics.mean(r[k] for r in mine), 2) for k in
                           ("calls", "prompt_tokens", "completion_tokens", "llm_latency_s", "wall_s", "locomo_f1",
                            "evidence_recall")}
    return {
        "command": command_line("memr3_vs_rag.py"),
        "model": llm, "slice": {"conversation": args.conv, "sessions": len(conv.sessions), "turns": len(conv.turns),
                                "questions": [q.id for q in questions]},
        "settings": {"memr3_max_iterations": ctx.memr3_max_iterations, "memr3_top_k": ctx.memr3_top_k,
                     "memr3_rerank": ctx.memr3_rerank, "memr3_chunk_tokens": ctx.memr3_chunk_tokens,
                     "rag_top_k": ctx.rag_top_k},
        "summary": summary, "rows": rows,
    }


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    lines = [
        "# MemR3 vs RAG: cost per question with the local model", "",
        f"Command: `{report['command']}`  ", f"Model: `{report['model']}` (llama.cpp, 2 CPU threads)  ",
        f"Slice: {report['slice']['conversation']}, first {report['slice']['sessions']} sessions "
        f"({report['slice']['turns']} turns), {len(report['slice']['questions'])} questions (categories 1, 2, 4)  ",
        f"Settings: {report['settings']}", "",
        "| method | LLM calls | prompt tokens | completion tokens | LLM time (s) | wall (s) | LoCoMo F1 | evidence recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in METHODS:
        r = s[m]
        lines.append(f"| {m} | {r['calls']} | {r['prompt_tokens']} | {r['completion_tokens']} | {r['llm_latency_s']} | "
                     f"{r['wall_s']} | {r['locomo_f1']} | {r['evidence_recall']} |")
    lines += ["", "Paper-side reference (MGRetrieval Table 3, Qwen2.5-14B): MemR3 3.27 calls, 5,169 tokens, 12.77 s per",
              "question; RAG 1 call, 2,091 tokens. Accuracy on a handful of questions is anecdotal, not a result.", "",
              "| question | category | method | calls | prompt tok | completion tok | wall (s) | F1 | evidence recall |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in report["rows"]:
        lines.append(f"| {r['question_id']} | {r['category']} | {r['method']} | {r['calls']} | {r['prompt_tokens']} | "
                     f"{r['completion_tokens']} | {r['wall_s']} | {r['locomo_f1']} | {r['evidence_recall']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_slice_args(ap, sessions=4, questions=4)
    ap.add_argument("--out", default=str(REPORTS), help="output directory (memr3_vs_rag.json and .md are written)")
    args = ap.parse_args()
    report = run(args)
    write_report(Path(args.out) / "memr3_vs_rag", report, markdown(report))


if __name__ == "__main__":
    main()
