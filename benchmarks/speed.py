"""Speed on the embedded model: the old path and the new one measured in one run on the same machine.

    python benchmarks/speed.py [--data locomo_dev.json] [--conversation conv-26] [--sessions 1] [--questions 3]

Each phase runs in its own processes (the runtime is a process-wide setting), one after the other, never
side by side (two llama.cpp servers on 2 cores slow each other by an order of magnitude):

- `before`: llama-cpp-python compiled with the old AVX2 flags, and the old verbose ingestion formats
  (`mra_ingest_format=json`, `mra_ingest_cues=llm`, `mg_ingest_format=json`);
- `after`: the defaults (the prebuilt xllamacpp server with its prompt cache, compact ingestion formats).

Per phase: (1) the server's limits: prefill and decode tokens/s, measured on a fresh prompt (nothing to
reuse) and a long generation; (2) `recollect eval` on a fresh data dir: memory construction of the slice by
every builder (seconds per session), then the slice's questions with every graph (seconds, LoCoMo-F1,
prompt/completion/cached tokens). `limit_s` is what a question's tokens cost at the measured limits with no
prefix reuse: prompt_tokens / prefill + completion_tokens / decode. Writes benchmarks/reports/speed.{json,md}.
The LoCoMo file (CC BY-NC) is read at run time; the report holds no dataset text.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.subprocess_run import ROOT, machine, run_python  # noqa: E402

PHASES: dict[str, dict[str, Any]] = {
    "before": {"env": {"RECOLLECT_LOCAL_RUNTIME": "llama-cpp-python", "RECOLLECT_LOCAL_CPU_FLAGS": "avx2"},
               "settings": ["mra_ingest_format=json", "mra_ingest_cues=llm", "mg_ingest_format=json",
                            # MGRetrieval's rounds as they were (issue 11 changed them; the spec's values)
                            "mg_assess_grounding=false", "mg_dense_fill=0", "mg_exhausted_fallback=stop",
                            "mg_keep_critical_when_none=false", "mg_rewrite_keep_draft=false"]},
    "after": {"env": {}, "settings": []},
}
BUILDERS = ("hymem", "mragent", "mgretrieval")


# --------------------------------------------------------------------------------------------- limits


def measure_limits(repeats: int = 2) -> dict[str, float]:
    """Prefill and decode tokens/s of the embedded server in this process's runtime (best of `repeats`)."""
    from recollect.llm.models import default_chat_model, stop_local_server

    model = default_chat_model()
    filler = " ".join(f"Note {i}: the blue kettle stood on shelf {i % 7} next to {i * 3} cups." for i in range(70))
    prefill, decode = [], []
    try:
        for _ in range(repeats):
            # A new nonce first: nothing of this prompt is in any cache, so all of it is prefilled.
            prompt = f"[{uuid.uuid4().hex}] {filler}\nReply with one word."
            t = time.monotonic()
            msg = model.invoke(prompt, max_tokens=1)
            n_prompt = int((msg.usage_metadata or {}).get("input_tokens") or 0)
            prefill.append(n_prompt / (time.monotonic() - t))
            short = f"[{uuid.uuid4().hex}] Count from 1 to 300, numbers separated by commas."
            t = time.monotonic()
            msg = model.invoke(short, max_tokens=160)
            wall = time.monotonic() - t
            usage = msg.usage_metadata or {}
            n_out = int(usage.get("output_tokens") or 0)
            n_in = int(usage.get("input_tokens") or 0)
            decode.append(max(n_out - 1, 1) / max(wall - n_in / prefill[-1], 1e-6))
    finally:
        stop_local_server()
    return {"prefill_tps": round(max(prefill), 2), "decode_tps": round(max(decode), 2)}


# --------------------------------------------------------------------------------------------- phases


def run_phase(name: str, a: argparse.Namespace, out: Path) -> dict[str, Any]:
    phase = PHASES[name]
    env = dict(os.environ, **phase["env"], PYTHONUNBUFFERED="1")
    pdir = out / name
    if pdir.exists() and not a.resume:
        shutil.rmtree(pdir)
    pdir.mkdir(parents=True, exist_ok=True)
    log = pdir / "log.txt"
    print(f"[{name}] limits ({phase['env'] or 'defaults'})", flush=True)
    run_python(["benchmarks/speed.py", "--limits-only", "--limits-out", str(pdir / "limits.json")], log, env)
    sets = [x for kv in phase["settings"] for x in ("--set", kv)]
    print(f"[{name}] eval: construction + {a.questions} question(s) x {len(a.methods)} graphs", flush=True)
    run_python(["-m", "recollect.cli", "--data-dir", str(pdir / "data"), "eval", "--data", a.data,
             "--methods", ",".join(a.methods), "--conversations", a.conversation,
             "--max-sessions", str(a.sessions), "--categories", "1,2,4", "--limit", str(a.questions),
             "--judge", "none", "--out", str(pdir / "eval"), "--quiet", *sets], log, env)
    return collect(pdir)


def collect(pdir: Path) -> dict[str, Any]:
    limits = json.loads((pdir / "limits.json").read_text())
    summary = json.loads((pdir / "eval" / "summary.json").read_text())
    rows = [json.loads(line) for line in (pdir / "eval" / "per_question.jsonl").read_text().splitlines() if line]
    methods: dict[str, Any] = {}
    for method, stats in summary["methods"].items():
        o = stats["overall"]
        mine = [r for r in rows if r["method"] == method]
        prompt, completion = o["prompt_tokens"], o["completion_tokens"]
        methods[method] = {
            "s": round(o["wall_time_s"]["mean"], 2), "f1": round(100 * o["locomo_f1"], 2),
            "prompt_tokens": round(prompt), "completion_tokens": round(completion),
            "cached_tokens": round(sum(r.get("cached_tokens") or 0 for r in mine) / max(len(mine), 1)),
            "calls": round(o["n_llm_calls"], 2),
            "limit_s": round(prompt / limits["prefill_tps"] + completion / limits["decode_tps"], 2),
        }
    ingest: dict[str, Any] = {}
    for entry in summary["metadata"]["memory_construction"].values():
        for built in entry.get("built", []):
            if built["method"] in BUILDERS and built.get("sessions"):
                ingest[built["method"]] = {"s_per_session": round(built["seconds"] / built["sessions"], 2),
                                           "completion_tokens": built["completion_tokens"],
                                           "prompt_tokens": built["prompt_tokens"], "calls": built["llm_calls"]}
    meta = summary["metadata"]
    return {"limits": limits, "methods": methods, "ingest": ingest,
            "questions": meta["question_counts"]["n_questions"],
            # when and at which commit the phase ran: with --resume a phase can come from an earlier run
            "measured": {"date": meta.get("date"), "git_commit": meta.get("git_commit")}}


# --------------------------------------------------------------------------------------------- report


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def build_report(before: dict[str, Any], after: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    per_q = {}
    for m in a.methods:
        b, n = before["methods"].get(m), after["methods"].get(m)
        if not b or not n:
            continue
        per_q[m] = {"before_s": b["s"], "after_s": n["s"], "speedup": round(b["s"] / n["s"], 2) if n["s"] else None,
                    "f1_before": b["f1"], "f1_after": n["f1"], "prompt_tokens": n["prompt_tokens"],
                    "completion_tokens": n["completion_tokens"], "cached_tokens": n["cached_tokens"],
                    "limit_s": n["limit_s"], "prompt_tokens_before": b["prompt_tokens"],
                    "completion_tokens_before": b["completion_tokens"], "limit_before_s": b["limit_s"]}
    ingest = {}
    for builder in BUILDERS:
        b, n = before["ingest"].get(builder), after["ingest"].get(builder)
        if b and n:
            ingest[builder] = {"before_s": b["s_per_session"], "after_s": n["s_per_session"],
                               "speedup": round(b["s_per_session"] / n["s_per_session"], 2),
                               "completion_tokens_before": b["completion_tokens"],
                               "completion_tokens_after": n["completion_tokens"]}
    cpu = machine()["cpu"]
    return {
        "command": "python benchmarks/speed.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": {"cpu": cpu, "cores": os.cpu_count()},
        "slice": {"conversation": a.conversation, "sessions": a.sessions, "questions": before["questions"],
                  "categories": [1, 2, 4]},
        "phases": {k: {"env": v["env"], "settings": v["settings"],
                       "measured": (before if k == "before" else after).get("measured")} for k, v in PHASES.items()},
        "limits": {"before": before["limits"], "after": after["limits"]},
        "per_question": per_q, "ingest_per_session": ingest,
        "geomean_speedup_per_question": round(geomean([v["speedup"] or 0 for v in per_q.values()]), 2),
    }


def markdown(rep: dict[str, Any]) -> str:
    lb, la = rep["limits"]["before"], rep["limits"]["after"]
    lines = [
        "# Speed on the embedded model: before and after, one run, same machine", "",
        f"Made by `{rep['command']}` on {rep['date']}, {rep['machine']['cores']} cores ({rep['machine']['cpu']}).",
        f"Slice: {rep['slice']['conversation']}, first {rep['slice']['sessions']} session(s), "
        f"{rep['slice']['questions']} question(s) of categories 1/2/4, every graph; no judge.", "",
        "- **before**: llama-cpp-python 0.3.36 compiled with AVX2, and the settings that restore the old code "
        "paths: " + ", ".join(f"`{kv}`" for kv in rep["phases"]["before"]["settings"]),
        "- **after**: the defaults: xllamacpp (llama.cpp's C++ server, prebuilt wheel) with its prompt cache, "
        "compact ingestion formats", "",
        *[f"The {k} phase ran on {(v.get('measured') or {}).get('date') or '?'} at commit "
          f"{((v.get('measured') or {}).get('git_commit') or '?')[:12]}." for k, v in rep["phases"].items()], "",
        "## The server's limits", "",
        "| phase | prefill tok/s | decode tok/s |", "|---|---|---|",
        f"| before | {lb['prefill_tps']} | {lb['decode_tps']} |", f"| after | {la['prefill_tps']} | {la['decode_tps']} |",
        "", "## Per question (means)", "",
        "`limit s` = prompt tokens / prefill + completion tokens / decode at the after-phase limits, with no prefix "
        "reuse; `cached` = prompt tokens the server reused from its prompt cache.", "",
        "| graph | before s | after s | speedup | F1 before | F1 after | prompt tok | compl. tok | cached | "
        "limit s | after ÷ limit |", "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m, v in rep["per_question"].items():
        ratio = round(v["after_s"] / v["limit_s"], 2) if v["limit_s"] else "–"
        lines.append(f"| {m} | {v['before_s']} | {v['after_s']} | {v['speedup']}× | {v['f1_before']} | "
                     f"{v['f1_after']} | {v['prompt_tokens']} | {v['completion_tokens']} | {v['cached_tokens']} | "
                     f"{v['limit_s']} | {ratio} |")
    lines += ["", f"Geometric-mean speedup per question: **{rep['geomean_speedup_per_question']}×**.", "",
              "## Memory construction, seconds per session", "",
              "| builder | before s | after s | speedup | completion tokens before | after |", "|---|---|---|---|---|---|"]
    for b, v in rep["ingest_per_session"].items():
        lines.append(f"| {b} | {v['before_s']} | {v['after_s']} | {v['speedup']}× | "
                     f"{v['completion_tokens_before']} | {v['completion_tokens_after']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/shared/data/locomo/locomo_dev.json")
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--methods", default="rag,full_context,memr3,hymem,mgretrieval,mragent")
    ap.add_argument("--phases", default="before,after")
    ap.add_argument("--out", default="runs/speed", help="run folder (uncommitted: it holds dataset text)")
    ap.add_argument("--report", default=str(ROOT / "benchmarks" / "reports"))
    ap.add_argument("--resume", action="store_true", help="keep finished phases' folders (eval resumes)")
    ap.add_argument("--limits-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--limits-out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.limits_only:
        limits = measure_limits()
        Path(a.limits_out).write_text(json.dumps(limits))
        print(limits)
        return 0
    a.methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    out = ROOT / a.out
    results = {}
    for name in [p.strip() for p in a.phases.split(",")]:
        done = out / name / "eval" / "summary.json"
        results[name] = collect(out / name) if a.resume and done.is_file() else run_phase(name, a, out)
    if not {"before", "after"} <= set(results):
        return 0
    rep = build_report(results["before"], results["after"], a)
    Path(a.report).mkdir(parents=True, exist_ok=True)
    (Path(a.report) / "speed.json").write_text(json.dumps(rep, indent=2) + "\n")
    (Path(a.report) / "speed.md").write_text(markdown(rep))
    print(markdown(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
