"""`recollect eval`: run methods over LoCoMo questions and write per-question rows, a summary and plots.

The flow:
1. validate everything the user chose (file, methods, categories, conversations) before any work;
2. build the question set and, optionally, restrict it to the first N sessions (smoke runs);
3. ingest each needed conversation into `locomo-<sample_id>` with only the builders the methods need;
4. answer every (method, question) pair, optionally judge it, and append one JSON row per pair to
   `per_question.jsonl`, flushed at once, so an interrupted run resumes where it stopped;
5. aggregate the rows of the current selection into `summary.json`/`summary.md`, the CSV and the plots.

Judge choices (`judge`): `"none"`; `"local"` = the backbone's own chat model (the configured
`RECOLLECT_LLM_*` endpoint, or the embedded model); any other string = that model name on the judge
endpoint `RECOLLECT_JUDGE_BASE_URL` (OpenAI when unset) with key `RECOLLECT_JUDGE_API_KEY` (else
`OPENAI_API_KEY`); or a ready judge object with `.judge(question, gold, prediction)` and `.model_name`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from recollect.dialogue.models import Conversation
from recollect.eval.plan import JUDGED_CATEGORIES, EvalError, Plan, namespace_for, plan_run
from recollect.eval.questions import (
    Question,
)
from recollect.eval.rows import JSONL_NAME, evaluate_pair, load_rows
from recollect.graphs.registry import AllMethodsContext
from recollect.settings import get_settings, setting_names


def backbone_name(ctx: AllMethodsContext) -> str:
    from recollect.llm.models import model_entry, model_name

    if ctx.chat_model is not None:
        return model_name(ctx.chat_model)
    entry = model_entry(ctx.model)  # a run's `model` setting names one of the configured endpoints
    if entry is not None:
        return entry["model"]
    s = get_settings()
    if s.llm_base_url:
        return s.llm_model or "gpt-4o-mini"  # the factory's default model name
    return f"embedded-{s.local_model}"


def _endpoint_judge_model(name: str) -> Any:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    s = get_settings()
    return ChatOpenAI(
        base_url=s.judge_base_url or None,
        api_key=SecretStr(s.judge_api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"),
        model=name, temperature=0.0, timeout=s.llm_timeout_s, max_retries=s.llm_max_retries,
    )


def resolve_judge(judge: Any, ctx: AllMethodsContext) -> tuple[Any, str | None]:
    """(judge object or None, judge model name for the reports)."""
    from recollect.eval.judge import LLMJudge
    from recollect.llm.models import get_chat_model

    if judge is None or judge == "none":
        return None, None
    if not isinstance(judge, str):
        return judge, str(getattr(judge, "model_name", type(judge).__name__))
    if not judge.strip():
        raise EvalError("--judge needs 'none', 'local' or a model name")
    cache = Path(get_settings().cache_dir) / "judge_cache.sqlite"
    if judge == "local":
        name = backbone_name(ctx)
        return LLMJudge(get_chat_model(ctx), name, cache_path=cache), name
    endpoint_judge = LLMJudge(_endpoint_judge_model(judge), judge, cache_path=cache)
    try:
        endpoint_judge.probe()
    except RuntimeError as exc:
        raise EvalError(f"--judge: {exc} (RECOLLECT_JUDGE_BASE_URL={get_settings().judge_base_url or 'OpenAI'})") from None
    return endpoint_judge, judge


def run_config(plan: Plan, judge_model: str | None, backbone: str, ctx: AllMethodsContext) -> dict[str, Any]:
    """What determines the results (concurrency and data_dir do not): hashed into the run id."""
    settings = {n: getattr(ctx, n) for n in setting_names(AllMethodsContext) if n != "data_dir"}
    return {
        "dataset_sha256": plan.dataset_sha256,
        "methods": sorted(plan.methods),
        "conversations": sorted(plan.conversations),
        "categories": list(plan.qset.categories),
        "limit": plan.limit,
        **({"sample": plan.sample, "seed": plan.seed} if plan.sample is not None else {}),
        "max_sessions": plan.max_sessions,
        "dedupe": plan.qset.dedupe,
        "include_adversarial": plan.qset.include_adversarial,
        "judge_model": judge_model,
        "backbone_model": backbone,
        "context": settings,
    }


def make_run_id(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode("utf-8")
    return "eval-" + hashlib.sha256(blob).hexdigest()[:12]


# --------------------------------------------------------------------------------------------- per-question rows


def _run_pairs(
    pending: Sequence[tuple[str, Question]],
    work: Callable[[str, Question], dict[str, Any]],
    concurrency: int,
    on_row: Callable[[dict[str, Any]], None],
) -> None:
    if concurrency <= 1:
        for method, q in pending:
            on_row(work(method, q))
        return
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eval")
    try:
        futures = [pool.submit(work, m, q) for m, q in pending]
        for fut in as_completed(futures):
            on_row(fut.result())  # rows are written by this thread only, so no file lock is needed
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # finish the in-flight questions, drop the rest
        raise
    pool.shutdown(wait=True)


# --------------------------------------------------------------------------------------------- ingestion


def _missing_builders(info: Any, conv: Conversation, needed: Sequence[str]) -> list[str]:
    if info is None or not {s.index for s in conv.sessions} <= set(info.sessions):
        return list(needed)
    return [b for b in needed if b not in info.built]


def ingest_needed(
    plan: Plan, sample_ids: Iterable[str], ctx: AllMethodsContext, show_progress: bool
) -> dict[str, dict[str, Any]]:
    """Build only what is missing; returns per-namespace construction cost (reused builders cost nothing)."""
    from recollect.graphs.registry import GRAPH_NEEDS
    from recollect.ingestion import ingest_conversation
    from recollect.memory.workspace import open_workspace

    needed = sorted({b for m in plan.methods if (b := GRAPH_NEEDS.get(m))})
    out: dict[str, dict[str, Any]] = {}
    for sample_id in sample_ids:
        conv = plan.conversations[sample_id]
        ns = namespace_for(sample_id, plan.max_sessions)
        info = open_workspace(ctx.data_dir).namespace_info(ns)
        missing = _missing_builders(info, conv, needed)
        entry: dict[str, Any] = {"reused": [b for b in needed if b not in missing], "built": []}
        if info is None or missing:
            start = time.monotonic()
            reports = ingest_conversation(conv, ns, ctx, methods=missing, show_progress=show_progress)
            entry["built"] = [r.as_dict() for r in reports]
            entry["seconds"] = round(time.monotonic() - start, 3)
        out[ns] = entry
    return out


def _merge_ingest_log(path: Path, new: dict[str, dict[str, Any]]) -> dict[str, Any]:
    log = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for ns, entry in new.items():
        if entry["built"] or ns not in log:  # keep the first real build's cost across resumes
            log[ns] = entry
    path.write_text(json.dumps(log, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return log


# --------------------------------------------------------------------------------------------- main entry


def _check_resumable(rows: Sequence[dict[str, Any]], ids: dict[str, str | None], out: Path) -> None:
    for row in rows:
        for key in ("backbone_model", "judge_model"):
            if row.get(key) != ids[key]:
                raise EvalError(
                    f"{out / JSONL_NAME} holds results with {key}={row.get(key)!r}, not {ids[key]!r}; "
                    "choose another --out (or delete that folder) for a different configuration"
                )


def _check_dataset(out: Path, sha: str) -> None:
    cfg = out / "run_config.json"
    if cfg.is_file():
        old = json.loads(cfg.read_text(encoding="utf-8")).get("dataset_sha256")
        if old and old != sha:
            raise EvalError(f"{out} holds results for another data file (sha256 {old[:12]}…); choose another --out")


def run_eval(
    data_path: str | Path,
    methods: Iterable[str] | None = None,
    conversations: Iterable[str] | None = None,
    categories: Iterable[int] = JUDGED_CATEGORIES,
    limit: int | None = None,
    judge: Any = "none",
    out_dir: str | Path | None = None,
    concurrency: int = 1,
    ctx: AllMethodsContext | None = None,
    include_adversarial: bool = False,
    dedupe: bool = True,
    resume: bool = True,
    *,
    max_sessions: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    show_progress: bool = True,
    plots: bool = True,
    rows_dir: str | Path | None = None,
    plan_only: bool = False,
    time_budget_s: float | None = None,
    import_rows: Sequence[str | Path] = (),
    tapes: Sequence[str | Path] = (),
    reuse_replies: bool = False,
) -> Path:
    """Run the evaluation and write its report folder; returns that folder (default `runs/<run_id>`).

    With `rows_dir`, committed text-free rows there are reused while current, carried over by a tape
    replay when stale, and computed otherwise (`recollect.eval.ledger_run`); `plan_only` prints what that
    would do and calls no model; `time_budget_s` stops starting work that would not finish in time;
    `reuse_replies` serves a computed question's requests that are on the tape from it (`ledger_run`).
    """
    from recollect.eval import report

    ctx = ctx or AllMethodsContext()
    plan = plan_run(data_path, methods, conversations, categories, limit, concurrency,
                    include_adversarial, dedupe, max_sessions, sample, seed)
    judge_obj, judge_model = resolve_judge(judge, ctx)
    backbone = backbone_name(ctx)
    config = run_config(plan, judge_model, backbone, ctx)
    run_id = make_run_id(config)
    out = Path(out_dir) if out_dir is not None else Path("runs") / run_id
    out.mkdir(parents=True, exist_ok=True)
    ids: dict[str, str | None] = {"run_id": run_id, "backbone_model": backbone, "judge_model": judge_model,
                                  "code_commit": report.code_version(),
                                  "settings_id": hashlib.sha256(json.dumps(config["context"], sort_keys=True,
                                                                           default=str).encode()).hexdigest()[:12]}

    jsonl = out / JSONL_NAME
    if rows_dir is not None:
        return _run_with_ledger(plan, ctx, judge_obj, ids, config, out, Path(rows_dir), concurrency, plan_only,
                                time_budget_s, import_rows, tapes, show_progress, plots, reuse_replies)
    if plan_only or time_budget_s is not None or import_rows or tapes or reuse_replies:
        raise EvalError("--plan, --time-budget, --import-rows, --tape and --reuse-replies work with --rows DIR")
    _check_dataset(out, plan.dataset_sha256)
    if not resume and jsonl.exists():
        jsonl.unlink()
    rows = load_rows(jsonl)
    _check_resumable(rows, ids, out)
    (out / "run_config.json").write_text(json.dumps({"run_id": run_id, **config}, indent=2, default=str) + "\n",
                                         encoding="utf-8")

    pairs = [(m, q) for m in plan.methods for q in plan.questions]
    done = {(r["method"], r["question_id"]) for r in rows}
    pending = [(m, q) for m, q in pairs if (m, q.id) not in done]
    ingest_log = _merge_ingest_log(
        out / "ingest.json", ingest_needed(plan, dict.fromkeys(q.sample_id for _, q in pending), ctx, show_progress)
    )

    bar = tqdm(total=len(pairs), initial=len(pairs) - len(pending), desc="eval", unit="q",
               disable=not show_progress, dynamic_ncols=True)
    errors = 0
    with jsonl.open("a", encoding="utf-8") as fh:

        def on_row(row: dict[str, Any]) -> None:
            nonlocal errors
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()  # one complete line per finished question: the resume point
            os.fsync(fh.fileno())
            rows.append(row)
            errors += bool(row["error"])
            bar.set_postfix(method=row["method"], errors=errors, refresh=False)
            bar.update(1)

        try:
            _run_pairs(pending, lambda m, q: evaluate_pair(m, q, plan, ctx, judge_obj, ids), concurrency, on_row)
        finally:
            bar.close()

    selected = report.select_rows(rows, pairs)
    report.write_reports(out, selected, report.run_metadata(plan, ids, config, concurrency, ctx, ingest_log),
                         plan.methods, plots=plots)
    return out


def _run_with_ledger(plan: Plan, ctx: AllMethodsContext, judge_obj: Any, ids: dict[str, str | None],
                     config: dict[str, Any], out: Path, rows_dir: Path, concurrency: int, plan_only: bool,
                     time_budget_s: float | None, import_rows: Sequence[str | Path], tapes: Sequence[str | Path],
                     show_progress: bool, plots: bool, reuse_replies: bool = False) -> Path:
    """The `--rows` flow: plan from the committed rows, then carry over and compute within the budget."""
    from recollect.eval import ledger_run, report
    from recollect.eval.ledger import read_ledger

    if concurrency != 1:
        raise EvalError("--rows runs one question at a time (its tape and budget follow each question)")
    stale: list[dict[str, Any]] = []
    for path in import_rows:
        if not Path(path).is_file():
            raise EvalError(f"--import-rows: {path} is not a file")
        stale += ledger_run.import_text_rows(Path(path), plan)
    store = ledger_run.open_tapes(ctx, [Path(t) for t in tapes]) if not plan_only else None
    tape_entries = len(store) if store is not None else _tape_entries(ctx) + len(tapes)
    graphs = ledger_run.plan_graphs(plan, ctx, rows_dir, stale, tape_entries)
    print(ledger_run.plan_text(graphs, len(plan.questions)))
    if plan_only:
        return out
    assert store is not None
    if adopted := ledger_run.adopt_legacy_rows(graphs, rows_dir):
        print(f"{adopted} rows of an earlier scheme's digest copied under their graph's digest")
    jsonl = out / JSONL_NAME
    todo = sum(len(g.carry) + len(g.compute) for g in graphs)
    bar = tqdm(total=todo, desc="eval", unit="q", disable=not show_progress, dynamic_ncols=True)
    deadline = ledger_run.Deadline(time_budget_s)
    with jsonl.open("a", encoding="utf-8") as fh:

        def on_text_row(row: dict[str, Any]) -> None:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()

        try:
            ledger_run.run_graphs(graphs, plan, ctx, rows_dir, stale, store, deadline,
                                  lambda m, q, c: evaluate_pair(m, q, plan, c, judge_obj, ids), on_text_row,
                                  show_progress, tick=lambda m: (bar.set_postfix(method=m, refresh=False),
                                                                 bar.update(1)), reuse_replies=reuse_replies)
        finally:
            bar.close()
    current = {(g.method, fp) for g in graphs for fp in g.accepted}
    latest = {(r["method"], r["question_id"]): r for r in read_ledger(rows_dir, plan.methods)
              if (r["method"], r["fingerprint"]) in current}
    pairs = [(m, q) for m in plan.methods for q in plan.questions]
    selected = [latest[(m, q.id)] for m, q in pairs if (m, q.id) in latest
                and latest[(m, q.id)]["question_digest"] == ledger_run.asked_digest(q)]
    meta = report.run_metadata(plan, ids, config, concurrency, ctx, {})
    meta["ledger"] = ledger_run.ledger_metadata(graphs, selected, len(plan.questions), deadline.stopped,
                                                rows_dir)
    report.write_reports(out, selected, meta, plan.methods, plots=plots)
    if deadline.stopped:
        print(f"time budget reached: partial summary in {out / 'summary.md'}; run the same command to continue")
    return out


def _tape_entries(ctx: AllMethodsContext) -> int:
    """Whether a replay could answer anything, without loading the tapes (for --plan)."""
    from recollect.eval.fingerprint import model_identity
    from recollect.eval.tape import tape_folder

    folder = tape_folder(get_settings().cache_dir, model_identity(ctx))
    return sum(1 for _ in folder.glob("*.jsonl")) if folder.is_dir() else 0
