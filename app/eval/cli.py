"""`recollect eval`: the evaluation runner's command line (registered by `recollect.cli` when present).

    recollect eval --data locomo10.json                                  # every method, judge = backbone
    recollect eval --data F --methods rag,memr3 --categories 1,2 --limit 5 --judge none
    recollect eval --data F --judge gpt-4o-mini                          # RECOLLECT_JUDGE_BASE_URL/API_KEY

The default output folder is `runs/<run_id>`, where the run id hashes the configuration, so running the
same command again resumes it; `--out` picks another folder.
"""

from __future__ import annotations

import argparse
from typing import Any


def _split(values: list[str] | None) -> list[str] | None:
    """`--methods a,b c` → [a, b, c]; None when the option was not given."""
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _categories(values: list[str] | None) -> list[int]:
    if values is not None and not _split(values):
        # `--categories ,` names no category: running the default ones instead would hide the mistake
        raise ValueError("--categories: no category number given (choose from 1-5)")
    out = []
    for v in _split(values) or ["1", "2", "3", "4"]:
        try:
            out.append(int(v))
        except ValueError:
            raise ValueError(f"--categories: {v!r} is not a category number (1-5)") from None
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    from recollect.cli_args import _context
    from recollect.eval.estimate import parse_duration
    from recollect.eval.runner import run_eval

    budget = parse_duration(args.time_budget) if args.time_budget else None

    out = run_eval(
        args.data,
        methods=_split(args.methods),
        conversations=_split(args.conversations),
        categories=_categories(args.categories),
        limit=args.limit,
        judge=args.judge,
        out_dir=args.out,
        concurrency=args.concurrency,
        ctx=_context(args),
        include_adversarial=args.include_adversarial,
        dedupe=not args.no_dedupe,
        resume=not args.restart,
        max_sessions=args.max_sessions,
        sample=args.sample,
        seed=args.seed,
        show_progress=not args.quiet,
        rows_dir=args.rows,
        plan_only=args.plan,
        time_budget_s=budget,
        import_rows=args.import_rows or [],
        tapes=args.tape or [],
        reuse_replies=args.reuse_replies,
    )
    if args.plan:
        return 0
    print(f"report: {out / 'summary.md'}")
    print((out / "summary.md").read_text(encoding="utf-8").split("## Overall (all methods)", 1)[-1]
          .split("\n## ", 1)[0].strip())
    return 0


def register(subparsers: Any) -> None:
    s = subparsers.add_parser(
        "eval", help="evaluate methods on a LoCoMo file: metrics, cost, reports and plots (resumable)",
        description="Answer LoCoMo questions with each method, score them and write "
        "per_question.jsonl/.csv, summary.json/.md and plots to --out (default runs/<run_id>). "
        "Re-running the same command resumes an interrupted run.",
    )
    s.add_argument("--data", required=True, metavar="FILE", help="LoCoMo-format JSON file (dev split or full)")
    s.add_argument("--methods", nargs="+", metavar="M", help="comma/space separated (default: all available)")
    s.add_argument("--conversations", nargs="+", metavar="ID", help="sample ids, e.g. conv-26 (default: all)")
    s.add_argument("--categories", nargs="+", metavar="C", help="category numbers (default: 1,2,3,4)")
    s.add_argument("--limit", type=int, help="first N selected questions per conversation (smoke runs; taken "
                   "after --sample, so the run is part of the sampled one)")
    s.add_argument("--sample", type=int, help="a stratified sample of N of the selected questions, in proportion "
                                             "to their categories (fixed by --seed)")
    s.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    s.add_argument("--max-sessions", type=int, metavar="N",
                   help="use only the first N sessions of each conversation, and only questions whose gold "
                   "evidence lies in them (namespace locomo-<id>-sN)")
    s.add_argument("--judge", default="local",
                   help="'none', 'local' (the backbone model itself; default) or a model name served at "
                   "RECOLLECT_JUDGE_BASE_URL (OpenAI when unset) with RECOLLECT_JUDGE_API_KEY")
    s.add_argument("--out", help="output folder (default: runs/<run_id>)")
    s.add_argument("--concurrency", type=int, default=1, help="questions in flight (for remote endpoints)")
    s.add_argument("--include-adversarial", action="store_true", help="add category 5 (two-option format)")
    s.add_argument("--no-dedupe", action="store_true", help="keep exact duplicate questions")
    s.add_argument("--restart", action="store_true", help="discard earlier rows in the output folder")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a runtime setting")
    s.add_argument("--rows", metavar="DIR",
                   help="committed text-free rows (one <graph>.jsonl each): reuse every row whose graph "
                   "fingerprint is current, carry stale ones over by replaying their tape, compute the rest "
                   "and append them there")
    s.add_argument("--plan", action="store_true",
                   help="with --rows: print per graph the rows current, to carry over and to compute, and the "
                   "estimated model time; call no model")
    s.add_argument("--time-budget", metavar="DURATION",
                   help="with --rows: start no memory build or question that would not finish within it "
                   "(140m, 2h, 1h30m); the summary is then marked partial and re-running continues")
    s.add_argument("--import-rows", nargs="+", metavar="JSONL",
                   help="with --rows: an earlier run's per_question.jsonl, carried over question by question "
                   "when a replay of its tape gives the same answers")
    s.add_argument("--tape", nargs="+", metavar="JSONL",
                   help="with --rows: tape files to replay from besides the cache's (benchmarks/llm_tape.py "
                   "recordings)")
    s.add_argument("--reuse-replies", action="store_true",
                   help="with --rows: a computed question takes the reply of every request already on the tape "
                   "(only its new requests reach the model; its seconds count the taped replies' server time); "
                   "never for speed measurements")
    s.set_defaults(func=cmd_eval)
