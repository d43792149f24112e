"""One eval report from the finished rows of several runs of the same slice (no LLM call).

    python benchmarks/assemble_dev_report.py --data-dir runs/eval_dev_data_lexical --out runs/eval_dev \\
        runs/eval_dev_dates:rag,full_context,hymem,memr3 runs/eval_dev_asaid:mgretrieval,mragent

Each `RUN:METHODS` takes those methods' rows from RUN's `per_question.jsonl`; every run must cover the same
dataset and question selection (conversations, categories, limit, sessions). The report (summary.md,
summary.json, per_question.{jsonl,csv}, plots) is written as the eval writes it, with the first run's
id and settings; `sources.json` beside it names the run each method's rows came from. Use it when one
graph's rows are re-run after a change that touches only that graph (the others' answers are unchanged),
or when a run was stopped after the graphs it was needed for.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SELECTION = ("dataset_sha256", "conversations", "categories", "limit", "max_sessions", "dedupe", "include_adversarial")


def main(argv: list[str] | None = None) -> int:
    from recollect.eval import report
    from recollect.eval.plan import plan_run
    from recollect.eval.rows import JSONL_NAME, load_rows
    from recollect.graphs.registry import AllMethodsContext

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="RUN:method,method,...")
    parser.add_argument("--data", default="/work/shared/data/locomo/locomo_dev.json", help="the runs' LoCoMo file")
    parser.add_argument("--data-dir", required=True, help="the data dir the runs read")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    picked: list[tuple[Path, list[str], dict[str, Any]]] = []
    for source in args.sources:
        run, _, methods = source.partition(":")
        config = json.loads((Path(run) / "run_config.json").read_text())
        if picked and any(config.get(k) != picked[0][2].get(k) for k in SELECTION):
            parser.error(f"{run} selects other questions than {picked[0][0]}: compare {', '.join(SELECTION)}")
        picked.append((Path(run), methods.split(","), config))
    first = picked[0][2]
    methods = [m for _, ms, _ in picked for m in ms]
    plan = plan_run(args.data, methods, first["conversations"], first["categories"], first["limit"], 1,
                    first["include_adversarial"], first["dedupe"], first["max_sessions"])
    rows: list[dict[str, Any]] = []
    for run, ms, _ in picked:
        chosen = [r for r in load_rows(run / JSONL_NAME) if r["method"] in ms]
        rows += report.select_rows(chosen, [(m, q) for m in ms for q in plan.questions])
    missing = {m: len(plan.questions) - sum(r["method"] == m for r in rows) for m in methods}
    if any(missing.values()):
        parser.error(f"unfinished methods (questions missing): {missing}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / JSONL_NAME).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    ids = {"run_id": first["run_id"], "backbone_model": first["backbone_model"], "judge_model": first["judge_model"]}
    ingest = json.loads((picked[0][0] / "ingest.json").read_text())
    meta = report.run_metadata(plan, ids, first, 1, AllMethodsContext(data_dir=args.data_dir), ingest)
    report.write_reports(args.out, rows, meta, plan.methods)
    (args.out / "sources.json").write_text(json.dumps(
        {m: {"run": str(run), "run_id": c["run_id"]} for run, ms, c in picked for m in ms}, indent=2) + "\n")
    print(f"wrote {args.out}: {len(rows)} rows from {len(picked)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
