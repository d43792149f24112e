"""Where each graph's seconds go, per question and per built session: one run, one machine, six graphs.

    python benchmarks/speed_report.py [--data locomo_dev.json] [--per-conversation 10] [--build-sessions 2]
                                      [--out benchmarks/reports/speed] [--work runs/speed_report]

Three steps (`--steps`), one after the other in their own processes (never two model jobs side by side on 2 cores):

1. the server's limits: prefill and decode tokens/s on a fresh prompt (`benchmarks/speed.py --limits-only`);
2. memory construction by the three model-calling builders (hymem, mragent, mgretrieval) on the first
   `--build-sessions` sessions of conv-26, in a fresh data directory (no cached reply): seconds per session,
   calls, tokens and the server's prefill/decode seconds;
3. the first `--per-conversation` questions of each dev conversation (`--conversations`) in the decisive
   eval's sample (categories 1-4, stratified, `--sample` 120, seed 0: `recollect eval --limit` is taken after
   the sample) with all six graphs, every row computed now (a fresh rows folder; the memory of the whole
   conversations comes from the eval cache, built first if missing).

Per graph, the means per question: seconds; prompt tokens computed (prompt minus those the server's cache
served); and the seconds split into prefill and decode (the server's own timings), the rest of the model
calls (HTTP, grammar, sampling set-up, queueing), retrieval (query embeddings, vector search, BM25, fusion:
recollect.memory.clock) and the rest (graph steps, store reads, prompt building). Each graph's seconds and
computed prefill are also given as a multiple of RAG's.

Writes summary.json and summary.md under --out, and the run's text-free ledger rows to --out/rows (they are
current rows of the decisive eval: `recollect eval ... --rows benchmarks/reports/eval_decisive/rows
--import-rows <work>/questions/per_question.jsonl` takes them over). The LoCoMo file (CC BY-NC) is read at
run time; nothing here holds its text. `--steps build` runs only that step (the report then has what --work holds); `--report-only` rebuilds the
report from an earlier --work folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.subprocess_run import ROOT, machine, run_python  # noqa: E402

GRAPHS = ("rag", "full_context", "hymem", "mgretrieval", "memr3", "mragent")
BUILDERS = ("hymem", "mragent", "mgretrieval")
CONVERSATIONS = ("conv-26", "conv-30")
BUILD_CONVERSATION = "conv-26"


# --------------------------------------------------------------------------------------------- steps


STEPS = ("limits", "build", "questions")


def measure(a: argparse.Namespace, work: Path) -> None:
    log = work / "log.txt"
    if "limits" in a.steps:
        print("limits: the server's prefill and decode tokens/s", flush=True)
        run_python(["benchmarks/speed.py", "--limits-only", "--limits-out", str(work / "limits.json")], log)
    if "build" in a.steps:
        build(a, work, log)
    if "questions" in a.steps:
        questions(a, work, log)


def build(a: argparse.Namespace, work: Path, log: Path) -> None:
    print(f"build: {', '.join(a.builders)} on the first {a.build_sessions} session(s) of {BUILD_CONVERSATION}, "
          "fresh data directory", flush=True)
    shutil.rmtree(work / "build", ignore_errors=True)
    run_python(["-m", "recollect.cli", "--data-dir", str(work / "build" / "data"), "eval", "--data", a.data,
             "--methods", ",".join(a.builders), "--conversations", BUILD_CONVERSATION,
             "--max-sessions", str(a.build_sessions), "--limit", "1", "--judge", "none",
             "--out", str(work / "build" / "eval"), "--quiet", *settings_args(a)], log)


def questions(a: argparse.Namespace, work: Path, log: Path) -> None:
    print(f"questions: {a.per_conversation} per conversation x {len(a.graphs)} graphs, every row computed now",
          flush=True)
    shutil.rmtree(work / "rows", ignore_errors=True)
    shutil.rmtree(work / "questions", ignore_errors=True)
    run_python(["-m", "recollect.cli", "eval", "--data", a.data, "--methods", ",".join(a.graphs),
             "--conversations", *a.conversations, "--categories", "1,2,3,4", "--sample", str(a.sample),
             "--seed", "0", "--limit", str(a.per_conversation), "--judge", "none", "--rows", str(work / "rows"),
             "--out", str(work / "questions"),
             *settings_args(a)], log)


def settings_args(a: argparse.Namespace) -> list[str]:
    """`--set KEY=VALUE` for each of the run's settings, passed to the eval of every step."""
    return [arg for kv in a.set for arg in ("--set", kv)]


# --------------------------------------------------------------------------------------------- report


def _m(rows: list[dict[str, Any]], key: str) -> float:
    vals = [float(r.get(key) or 0.0) for r in rows]
    return mean(vals) if vals else 0.0


def graph_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means per question of one graph's rows (errors included: their seconds were spent too)."""
    wall, llm, prefill, decode, retrieval = (_m(rows, k) for k in ("wall_time_s", "llm_s", "prefill_s", "decode_s",
                                                                     "retrieval_s"))
    timed = sum(int(r.get("timed_calls") or 0) for r in rows)
    calls = sum(int(r.get("n_llm_calls") or 0) for r in rows)
    return {
        "questions": len(rows),
        "seconds_per_question": round(wall, 2),
        "prefill_tokens_computed": round(_m(rows, "prompt_tokens_computed"), 1),
        "prompt_tokens": round(_m(rows, "prompt_tokens"), 1),
        "cached_tokens": round(_m(rows, "cached_tokens"), 1),
        "completion_tokens": round(_m(rows, "completion_tokens"), 1),
        "llm_calls": round(_m(rows, "n_llm_calls"), 2),
        "seconds": {"prefill": round(prefill, 2), "decode": round(decode, 2),
                    "model_call_other": round(max(llm - prefill - decode, 0.0), 2),
                    "retrieval": round(retrieval, 2), "other": round(max(wall - llm - retrieval, 0.0), 2)},
        # calls whose server reported its timings: below 1, prefill and decode cover only part of the calls
        "timed_call_share": round(timed / calls, 3) if calls else None,
        "locomo_f1": round(100 * _m(rows, "locomo_f1"), 1),
        "errors": sum(1 for r in rows if r.get("error")),
    }


def builder_figures(summary: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in (summary.get("metadata", {}).get("memory_construction") or {}).values():
        for built in entry.get("built", []):
            n = int(built.get("sessions") or 0)
            if built.get("method") in BUILDERS and n:
                out[built["method"]] = {
                    "sessions": n, "seconds_per_session": round(built["seconds"] / n, 2),
                    "llm_calls_per_session": round(built["llm_calls"] / n, 2),
                    "prompt_tokens_per_session": round(built["prompt_tokens"] / n, 1),
                    "completion_tokens_per_session": round(built["completion_tokens"] / n, 1),
                    "prefill_s_per_session": round(float(built.get("prefill_s") or 0.0) / n, 2),
                    "decode_s_per_session": round(float(built.get("decode_s") or 0.0) / n, 2),
                    "fallbacks": len(built.get("fallbacks") or []),
                }
    return out


def build_report(work: Path, command: str, conversations: list[str] | None = None) -> dict[str, Any]:
    from recollect.eval.ledger import read_ledger

    rows = read_ledger(work / "rows") if (work / "rows").is_dir() else []
    by_graph: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_graph.setdefault(r["method"], []).append(r)
    graphs = {g: graph_figures(by_graph[g]) for g in GRAPHS if g in by_graph}
    rag = graphs.get("rag")
    for fig in graphs.values():
        if rag and rag["seconds_per_question"] and rag["prefill_tokens_computed"]:
            fig["seconds_vs_rag"] = round(fig["seconds_per_question"] / rag["seconds_per_question"], 2)
            fig["prefill_vs_rag"] = round(fig["prefill_tokens_computed"] / rag["prefill_tokens_computed"], 2)
    questions = min((f["questions"] for f in graphs.values()), default=0)
    build_summary = work / "build" / "eval" / "summary.json"
    builders = builder_figures(json.loads(build_summary.read_text())) if build_summary.is_file() else {}
    provenance = sorted({json.dumps(r.get("provenance") or {}, sort_keys=True) for r in rows})
    return {
        "command": command, "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine(),
        "limits": json.loads((work / "limits.json").read_text()) if (work / "limits.json").is_file() else None,
        "questions": questions, "conversations": list(conversations or CONVERSATIONS), "categories": [1, 2, 3, 4],
        "graphs": graphs, "builders": builders,
        "fingerprints": {g: by_graph[g][0]["fingerprint"] for g in graphs},
        "provenance": [json.loads(p) for p in provenance],
    }


def markdown(rep: dict[str, Any]) -> str:
    lim = rep.get("limits") or {}
    lines = [
        "# Where the seconds go: six graphs, one run, one machine", "",
        f"Made by `{rep['command']}` on {rep['date']}, {rep['machine']['cores']} cores ({rep['machine']['cpu']}); "
        f"the server's limits in this run: prefill {lim.get('prefill_tps', '?')} tok/s, decode "
        f"{lim.get('decode_tps', '?')} tok/s.",
        f"{rep['questions']} questions of {', '.join(rep['conversations'])}: the first of each conversation in the "
        "decisive eval's sample (categories 1-4, stratified, seed 0), every row computed in this run; no judge.", "",
        "Means per question. `computed` = prompt tokens the model computed (the rest came from its prompt cache). "
        "Seconds split into the server's own prefill and decode timings, the rest of each model call (HTTP, "
        "grammar, queueing), retrieval (query embedding, vector search, BM25, fusion) and everything else.", "",
        "| graph | s / q | × rag | computed prefill tok | × rag | cached tok | completion tok | calls | prefill s "
        "| decode s | call other s | retrieval s | other s | F1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g, f in rep["graphs"].items():
        s = f["seconds"]
        lines.append(f"| {g} | {f['seconds_per_question']} | {f.get('seconds_vs_rag', '–')} | "
                     f"{f['prefill_tokens_computed']:.0f} | {f.get('prefill_vs_rag', '–')} | {f['cached_tokens']:.0f} | "
                     f"{f['completion_tokens']:.0f} | {f['llm_calls']} | {s['prefill']} | {s['decode']} | "
                     f"{s['model_call_other']} | {s['retrieval']} | {s['other']} | {f['locomo_f1']} |")
    if rep["builders"]:
        lines += ["", "## Memory construction, per session", "",
                  "| builder | sessions | s / session | calls | prompt tok | completion tok | prefill s | decode s "
                  "| fallbacks |", "|---|---|---|---|---|---|---|---|---|"]
        for b, f in rep["builders"].items():
            lines.append(f"| {b} | {f['sessions']} | {f['seconds_per_session']} | {f['llm_calls_per_session']} | "
                         f"{f['prompt_tokens_per_session']:.0f} | {f['completion_tokens_per_session']:.0f} | "
                         f"{f['prefill_s_per_session']} | {f['decode_s_per_session']} | {f['fallbacks']} |")
    lines += ["", "Fingerprints: " + ", ".join(f"{g} `{fp[:16]}`" for g, fp in rep["fingerprints"].items()) + ".", ""]
    return "\n".join(lines)


def write(rep: dict[str, Any], work: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rep, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(markdown(rep), encoding="utf-8")
    rows_out = out / "rows"
    if (work / "rows").is_dir():
        shutil.rmtree(rows_out, ignore_errors=True)
        shutil.copytree(work / "rows", rows_out)
    print(f"wrote {out / 'summary.json'}, {out / 'summary.md'} and {rows_out}/", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))
    ap.add_argument("--per-conversation", type=int, default=10,
                    help="the first N questions of each conversation in the sample")
    ap.add_argument("--sample", type=int, default=120, help="the stratified sample (seed 0) they come from: the "
                    "decisive eval's, so the rows at default settings are rows of that eval too")
    ap.add_argument("--build-sessions", type=int, default=2)
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--conversations", default=",".join(CONVERSATIONS),
                    help="whole conversations to draw the questions from (one builds half the memory)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "reports" / "speed"))
    ap.add_argument("--work", default=str(ROOT / "runs" / "speed_report"))
    ap.add_argument("--steps", default=",".join(STEPS), help="which steps to run (default: all three)")
    ap.add_argument("--report-only", action="store_true", help="rebuild the report from --work")
    ap.add_argument("--builders", default=",".join(BUILDERS), help="the builders of the build step")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for every graph and builder of the run (repeatable), as `recollect eval --set`")
    a = ap.parse_args(argv)
    a.graphs = [g for g in a.graphs.split(",") if g]
    a.steps = [x for x in a.steps.split(",") if x]
    a.conversations = [c for c in a.conversations.split(",") if c]
    a.builders = [b for b in a.builders.split(",") if b]
    if not a.builders or set(a.builders) - set(BUILDERS):
        ap.error(f"--builders: choose among {', '.join(BUILDERS)}")
    if not a.steps or set(a.steps) - set(STEPS):
        ap.error(f"--steps: choose among {', '.join(STEPS)}")
    if min(a.per_conversation, a.sample, a.build_sessions) < 1:
        ap.error("--per-conversation, --sample and --build-sessions must be at least 1")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    if not a.report_only:
        if not Path(a.data).is_file():
            ap.error(f"--data {a.data}: file not found")
        measure(a, work)
    elif not (work / "rows").is_dir() and not (work / "build" / "eval" / "summary.json").is_file():
        ap.error(f"--work {work}: nothing to report (run without --report-only first)")
    command = "python benchmarks/speed_report.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write(build_report(work, command.strip(), a.conversations), work, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
