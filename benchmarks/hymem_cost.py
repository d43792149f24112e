"""HyMem cost report: ingestion calls per session; calls, tokens and the deep share per question.

A small LoCoMo slice keeps real-model time low: the first `--sessions` sessions of one conversation
and the first `--questions` questions (categories 1–4) whose gold evidence lies in those sessions.
The LoCoMo file is read at run time from `--data` (CC BY-NC; never copied into the project).

    python benchmarks/hymem_cost.py --data /work/shared/data/locomo/locomo_dev.json            # real model
    python benchmarks/hymem_cost.py --data ... --scripted --out /tmp/hymem_cost                 # plumbing check

The real model comes from the usual settings (`RECOLLECT_LLM_BASE_URL`, …). `--scripted` uses a
fake model with fixed replies (light always insufficient) to prove the script works offline; its
numbers are not a measurement.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.devslice import (  # noqa: E402  (needs ROOT on sys.path)
    cost_script_main,
    load_slice,
    make_workspace,
    mean_of,
    question_row,
    report_head,
    report_identity,
    script_context,
    usage_fields,
)

PAPER = {"tokens_per_question": 1540, "deep_share": 0.22, "model": "gpt-4.1-mini", "k": 10}
SPEC_ESTIMATE = {"tokens_per_question_light_path": 1000, "tokens_per_question_deep_path": 5000,
                 "tokens_per_session_ingest": 1500}
_LINE = re.compile(r"^\[(D\d+:\d+)\] ([^:\n]+): (.*)$", re.M)


def scripted_model() -> Any:
    from recollect.llm.scripted import ScriptedChatModel

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        title = kwargs["response_format"]["schema"]["title"]
        text = str(messages[-1].content)
        if title == "SummaryReply":
            return {"items": [{"text": f"{s}: {t}", "turn_ids": [i]} for i, s, t in _LINE.findall(text)[:8]]}
        return {"LightReply": {"finished": 2, "answer": ""}, "LightTurnsReply": {"finished": 2, "answer": ""},
                "SelectReply": {"selected": [0, 1, 2]},
                "DeepReply": {"answer": "scripted", "supports": []}, "ReflectReply": {"finished": 1}}[title]

    return ScriptedChatModel(default=reply)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from recollect.ingestion import ingest_conversation
    from recollect.runner import ask

    conv, questions = load_slice(args.data, args.conv, args.sessions, args.questions)
    ws, data_dir = make_workspace(args.data_dir, "hymem-cost-", args.scripted)
    ctx = script_context(args, data_dir, scripted_model)

    t0 = time.monotonic()
    reports = ingest_conversation(conv, args.namespace, ctx, methods=["hymem"], ws=ws)
    ingest_s = time.monotonic() - t0
    build = reports[-1]
    n_sessions = len(conv.sessions)

    rows = []
    for q in questions:
        start = time.monotonic()
        out = ask(args.namespace, q.question, "hymem", ctx)
        trace = out.get("trace") or []
        rows.append(question_row(
            q, out, start,
            answered_by=next((r.get("answered_by") for r in trace if r["node"] == "answer"), None),
            deep=any(r["node"] == "deep" for r in trace),
            rounds=sum(r["node"] == "light" for r in trace),
            **usage_fields(out.get("usage") or {}),
        ))

    n = max(1, len(rows))
    return {
        **report_identity("hymem_cost.py", ctx, args, ws, conv, questions,
                          ("hymem_light_k", "hymem_deep_n", "hymem_deep_batch", "hymem_max_rounds",
                           "hymem_deep_max_sessions", "max_prompt_tokens", "structured_method")),
        "ingestion": {
            "llm_calls": build.llm_calls, "cached_calls": build.cached_calls,
            "calls_per_session": round(build.llm_calls / max(1, n_sessions), 2),
            "tokens": build.prompt_tokens + build.completion_tokens,
            "tokens_per_session": round((build.prompt_tokens + build.completion_tokens) / max(1, n_sessions)),
            "summaries": ws.index("hymem_summaries", args.namespace).count(),
            "fallbacks": build.fallbacks, "seconds": round(ingest_s, 1),
        },
        "per_question": {
            "calls": mean_of(rows, "calls"),
            **{k: mean_of(rows, k, None) for k in ("tokens", "prompt_tokens", "completion_tokens")},
            "deep_share": mean_of(rows, "deep", 3),
            "second_round_share": round(sum(r["rounds"] > 1 for r in rows) / n, 3),
            "evidence_recall": mean_of(rows, "evidence_recall", 3),
            "seconds": mean_of(rows, "seconds", 1),
            "max_calls": max((r["calls"] for r in rows), default=0),
        },
        "paper": PAPER,
        "spec_estimate": SPEC_ESTIMATE,
        "questions": rows,
    }


def markdown(rep: dict[str, Any]) -> str:
    pq, ing = rep["per_question"], rep["ingestion"]
    lines = [
        *report_head(rep, "HyMem cost report"),
        "| metric | ours | paper (gpt-4.1-mini, k = 10) | spec estimate |",
        "|---|---|---|---|",
        f"| tokens per question | {pq['tokens']} (prompt {pq['prompt_tokens']}, completion {pq['completion_tokens']})"
        f" | ~{PAPER['tokens_per_question']} | ~1k light path, ~5k deep path |",
        f"| LLM calls per question | {pq['calls']} (max {pq['max_calls']}) | – | 2 light path, 4 deep, ≤ 7 |",
        f"| share of questions needing deep | {pq['deep_share']:.0%} | {PAPER['deep_share']:.0%} | – |",
        f"| share going to a second round | {pq['second_round_share']:.0%} | – | – |",
        f"| ingestion calls per session | {ing['calls_per_session']} | not reported | 1 |",
        f"| ingestion tokens per session | {ing['tokens_per_session']} | not reported | ~1.5k |",
        f"| evidence recall (shown turns) | {pq['evidence_recall']:.0%} | – | – |",
        f"| seconds per question | {pq['seconds']} | – | 20 s – 1.5 min (CPU) |",
        "",
        f"Ingestion: {ing['llm_calls']} calls ({ing['cached_calls']} cached), {ing['summaries']} summaries, "
        f"{ing['seconds']} s; fallbacks: {len(ing['fallbacks'])}.",
        "",
        "| question | category | answered by | calls | tokens | LoCoMo F1 | answer length (words) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rep["questions"]:
        lines.append(f"| {r['id']} | {r['category']} | {r['answered_by']} | {r['calls']} | {r['tokens']} "
                     f"| {r['locomo_f1']} | {r['answer_words']} |")
    lines += [
        "",
        "Notes: three questions are far too few to estimate a deep share; the figure says which path these",
        "questions took, not the population rate. Token counts come from the endpoint's usage fields where it",
        "returns them (retries included); the paper probably counts context tokens only.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    cost_script_main(__doc__ or "", run, markdown, namespace="hymem-cost", report="hymem_cost")


if __name__ == "__main__":
    main()
