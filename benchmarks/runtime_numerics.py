"""Do two llama.cpp builds decode the same greedy text? Fixed prompts, one runtime per run.

    python benchmarks/runtime_numerics.py --out runs/numerics/xllamacpp.json                  # the default runtime
    RECOLLECT_LOCAL_RUNTIME=llama-cpp-python python benchmarks/runtime_numerics.py --out runs/numerics/lcp.json
    pip install --no-deps --target /tmp/xl-old xllamacpp==2026.9.11063
    python benchmarks/runtime_numerics.py --xllamacpp-dir /tmp/xl-old --out runs/numerics/xl-old.json
    python benchmarks/runtime_numerics.py --compare runs/numerics/*.json --report benchmarks/reports/runtime_numerics

Each prompt is the first 14 turns of one of the first 3 sessions of the first 2 dev conversations, with
one instruction after them; the reply is greedy (temperature 0), 100 tokens at most, no grammar. The run
files hold the replies (dataset text: keep them under runs/). `--compare` writes only agreement numbers
(identical replies, the characters before the first difference) to the report folder.
`--xllamacpp-dir` serves an xllamacpp release installed with `pip --target` (so the venv keeps its
pinned one): the server process gets that folder first on its PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from itertools import combinations
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INSTRUCTION = "List every plan or event mentioned above with its date, one per line."


def prompts(data: str) -> list[str]:
    from recollect.dialogue.loaders import load_dialogues

    out = []
    for conv in load_dialogues(data)[:2]:
        for s in conv.sessions[:3]:
            text = "\n".join(f"{t.speaker}: {t.full_text}" for t in s.turns[:14])
            out.append(f"Conversation on {s.date_time}:\n{text}\n\n{INSTRUCTION}")
    return out


def server(xllamacpp_dir: str | None) -> Any:  # -> LocalServer, not started
    """The configured runtime's server, or (a folder given) the xllamacpp release installed there."""
    from recollect.llm.local_runtime import LocalServer

    if xllamacpp_dir is None:
        return LocalServer()
    return LocalServer(runtime="xllamacpp",
                       extra_env={"PYTHONPATH": os.pathsep.join([xllamacpp_dir, str(ROOT)])})


def run(args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = []
    with server(args.xllamacpp_dir) as srv:
        url, alias = srv.base_url, srv.spec.alias
        for i, p in enumerate(prompts(args.data), start=1):
            body = {"model": alias, "messages": [{"role": "user", "content": p}], "max_tokens": 100, "temperature": 0}
            req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                reply = json.load(r)
            rows.append({"prompt_tokens": reply["usage"]["prompt_tokens"],
                         "text": reply["choices"][0]["message"]["content"]})
            print(f"prompt {i}: {rows[-1]['prompt_tokens']} tokens", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"runtime": args.label or Path(args.out).stem, "replies": rows}, indent=1))


def common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def compare(args: argparse.Namespace) -> None:
    runs = [json.loads(Path(f).read_text()) for f in args.compare]
    pairs = []
    for a, b in combinations(runs, 2):
        ra, rb = a["replies"], b["replies"]
        if [r["prompt_tokens"] for r in ra] != [r["prompt_tokens"] for r in rb]:
            raise SystemExit(f"{a['runtime']} and {b['runtime']} saw different prompts")
        prefix = [common_prefix(x["text"], y["text"]) for x, y in zip(ra, rb, strict=True)]
        pairs.append({"a": a["runtime"], "b": b["runtime"], "prompts": len(ra),
                      "identical": sum(x["text"] == y["text"] for x, y in zip(ra, rb, strict=True)),
                      "chars_before_first_difference": prefix,
                      "reply_chars_a": [len(x["text"]) for x in ra]})
    out = Path(args.report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "numerics.json").write_text(json.dumps({"command": " ".join(sys.argv), "pairs": pairs}, indent=1) + "\n")
    lines = ["| runtime A | runtime B | identical replies | characters before the first difference (A's length) |",
             "|---|---|---|---|"]
    for p in pairs:
        diffs = ", ".join(f"{c} ({n})" for c, n in zip(p["chars_before_first_difference"], p["reply_chars_a"],
                                                       strict=True))
        lines.append(f"| {p['a']} | {p['b']} | {p['identical']} of {p['prompts']} | {diffs} |")
    (out / "numerics.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/work/shared/data/locomo/locomo_dev.json")
    ap.add_argument("--out", help="the run file (replies) of the configured runtime")
    ap.add_argument("--label", help="the runtime's name in the report (default: the run file's stem)")
    ap.add_argument("--xllamacpp-dir", help="serve the xllamacpp installed in this folder (pip --target)")
    ap.add_argument("--compare", nargs="+", help="run files to compare pairwise")
    ap.add_argument("--report", default="benchmarks/reports/runtime_numerics")
    args = ap.parse_args()
    if args.compare:
        compare(args)
    elif args.out:
        run(args)
    else:
        ap.error("give --out (one run) or --compare (run files)")


if __name__ == "__main__":
    main()
