"""Where a recorded run's model time went, per kind of call: numbers only, from the eval's request tapes.

    python benchmarks/tape_calls.py TAPE.jsonl [TAPE.jsonl ...] [--out benchmarks/reports/speed/<name>]

A tape (`recollect.eval.tape`, ~/.cache/recollect/tapes; `benchmarks/llm_tape.py record`) holds every chat
request and the server's reply, dataset text included, so tapes stay out of the repository; this reads them
and writes numbers only. A call's kind is its reply schema's name (the structured call asked for), "tools"
for a tool-calling request, "text" otherwise; within a kind, calls are also split by how many messages they
sent (a continued exchange sends more). Per kind: calls, and per call the prompt tokens the server computed
and those its cache served (llama.cpp's `timings.prompt_n` and `cache_n`), completion tokens, and the
server's prefill and decode seconds. Replies without llama.cpp timings (another server) count usage only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

FIELDS = ("computed", "cached", "completion", "prefill_s", "decode_s")


def call_kind(request: dict[str, Any]) -> str:
    fmt = request.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name") or (fmt.get("schema") or {}).get("title")
    return str(name) if name else ("tools" if request.get("tools") else "text")


def call_numbers(reply: dict[str, Any]) -> dict[str, float]:
    timings = reply.get("timings") or {}
    usage = reply.get("usage") or {}
    prompt = float(usage.get("prompt_tokens") or 0)
    cached = float(timings.get("cache_n") if "cache_n" in timings else
                   ((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0))
    return {"computed": float(timings["prompt_n"]) if "prompt_n" in timings else prompt - cached, "cached": cached,
            "completion": float(usage.get("completion_tokens") or timings.get("predicted_n") or 0),
            "prefill_s": float(timings.get("prompt_ms") or 0) / 1000, "decode_s": float(timings.get("predicted_ms") or 0) / 1000}


def summarise(lines: list[str]) -> dict[str, Any]:
    """Per (kind, messages sent): calls and the mean of each number per call; the total of seconds."""
    groups: dict[tuple[str, int], list[dict[str, float]]] = defaultdict(list)
    for line in lines:
        row = json.loads(line)
        if row.get("status") != 200:
            continue
        request, reply = json.loads(row["request"]), json.loads(row["reply"])
        groups[call_kind(request), len(request.get("messages") or [])].append(call_numbers(reply))
    kinds = [{"kind": kind, "messages": n, "calls": len(v), **{f: round(mean(x[f] for x in v), 1) for f in FIELDS}}
             for (kind, n), v in sorted(groups.items(), key=lambda kv: -len(kv[1]))]
    seconds = sum(k["calls"] * (k["prefill_s"] + k["decode_s"]) for k in kinds)
    return {"calls": sum(k["calls"] for k in kinds), "model_seconds": round(seconds, 1), "kinds": kinds}


def markdown(result: dict[str, Any], command: str, title: str = "") -> list[str]:
    lines = ([f"# {title}", ""] if title else []) + [f"`{command}`: {result['calls']} calls, {result['model_seconds']} s of prefill and decode in all. "
             "Per call, means:", "",
             "| call | messages | calls | computed prompt tokens | cached | completion | prefill s | decode s |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {k['kind']} | {k['messages']} | {k['calls']} | " + " | ".join(f"{k[f]:g}" for f in FIELDS) + " |"
              for k in result["kinds"]]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tapes", nargs="+", type=Path)
    ap.add_argument("--out", help="write <out>.json and <out>.md")
    ap.add_argument("--title", default="", help="the report's heading (which graph, fingerprint and run)")
    args = ap.parse_args(argv)
    lines = [line for tape in args.tapes for line in tape.read_text(encoding="utf-8").splitlines() if line.strip()]
    result = summarise(lines)
    command = "python benchmarks/tape_calls.py " + " ".join(t.name for t in args.tapes)
    md = markdown(result, command, args.title)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{args.out}.json").write_text(json.dumps({"command": command, "title": args.title, **result}, indent=2) + "\n")
        Path(f"{args.out}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
