"""`recollect eval`: run methods over LoCoMo questions and write per-question rows, a summary and plots.

The flow (specs/evaluation.md §3–§7):
1. validate everything the user chose (file, methods, categories, conversations) before any work;
2. build the question set (§3) and, optionally, restrict it to the first N sessions (smoke runs);
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from recollect.dialogue.loaders import load_dialogues
from recollect.dialogue.models import Conversation
from recollect.eval.metrics import evidence_recall, score_prediction, session_of, session_recall
from recollect.eval.questions import (
    ADVERSARIAL_CATEGORY,
    CATEGORY_NAMES,
    Question,
    QuestionSet,
    adversarial_options,
    build_question_set,
    map_option_reply,
)
from recollect.graphs.mgretrieval.graph import AUX_LLM_NODES, ROUND_KIND_FIELDS, round_kinds
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.usage import token_source
from recollect.settings import get_settings, setting_names
from recollect.trace import shown_turn_ids

JUDGED_CATEGORIES = (1, 2, 3, 4)
ADVERSARIAL_SEED = 0  # option order of category-5 prompts (seeded per question, §3)
ROW_FIELDS = (
    "run_id", "method", "backbone_model", "judge_model", "sample_id", "question_id", "category",
    "category_name", "question", "gold", "prediction", "is_duplicate_of", "locomo_f1", "locomo_f1_r3",
    "mem0_f1", "bleu1", "judge_label", "judge_score", "judge_error", "evidence_ids", "retrieved_turn_ids",
    "evidence_recall", "session_recall", "supports", "support_recall", "n_llm_calls", "n_llm_calls_aux",
    "prompt_tokens", "completion_tokens", "cached_tokens", "token_source", "mg_tokens", "mg_tokens_main", "mg_tokens_aux", "wall_time_s", "error",
    "mg_rounds", "mg_speaker_only_rounds", "mg_cap_truncated_rounds", "mg_filled_turns", "mg_ungrounded_sufficient_rounds",
    "draft_answer", "draft_locomo_f1",
)
JSONL_NAME = "per_question.jsonl"


class EvalError(ValueError):
    """A user-fixable problem with an eval request; the message names the offending value."""


@dataclass(frozen=True)
class Plan:
    """Everything a run needs once the inputs are validated."""

    data_path: Path
    dataset_sha256: str
    methods: list[str]
    conversations: dict[str, Conversation]  # sample_id -> (possibly session-restricted) conversation
    qset: QuestionSet
    questions: list[Question]
    duplicate_of: dict[str, str]
    max_sessions: int | None
    limit: int | None


# --------------------------------------------------------------------------------------------- validation


def _check_methods(methods: Iterable[str] | None) -> list[str]:
    from recollect.graphs.registry import METHODS as GRAPHS
    from recollect.graphs.registry import available_methods

    available = available_methods()
    chosen = list(dict.fromkeys(methods)) if methods else available
    if not chosen:
        raise EvalError("no methods selected")
    for m in chosen:
        if m not in GRAPHS:
            raise EvalError(f"unknown method {m!r} (choose from: {', '.join(GRAPHS)})")
        if m not in available:
            raise EvalError(f"method {m!r} is not available in this installation (available: {', '.join(available)})")
    return chosen


def _check_numbers(limit: int | None, concurrency: int, max_sessions: int | None) -> None:
    if limit is not None and limit < 1:
        raise EvalError(f"limit must be >= 1, got {limit}")
    if concurrency < 1:
        raise EvalError(f"concurrency must be >= 1, got {concurrency}")
    if max_sessions is not None and max_sessions < 1:
        raise EvalError(f"max_sessions must be >= 1, got {max_sessions}")


def _check_categories(categories: Iterable[int], include_adversarial: bool) -> list[int]:
    cats = sorted(set(categories))
    bad = [c for c in cats if isinstance(c, bool) or c not in CATEGORY_NAMES]
    if bad:
        raise EvalError(f"unknown category {bad[0]!r} (known: {', '.join(map(str, CATEGORY_NAMES))})")
    if not cats and not include_adversarial:
        raise EvalError("no categories selected")
    return cats


def _load_conversations(data_path: Path) -> list[Conversation]:
    if not data_path.is_file():
        raise EvalError(f"{data_path}: data file not found")
    convs = load_dialogues(data_path)  # DialogueError (a ValueError) names file, record and field
    if not all(c.extra.get("format") == "locomo" for c in convs):
        raise EvalError(f"{data_path}: not a LoCoMo file (expected a list of samples with 'conversation' and 'qa')")
    return convs


def _restrict_sessions(conv: Conversation, max_sessions: int | None) -> Conversation:
    if max_sessions is None:
        return conv
    return replace(conv, sessions=conv.sessions[:max_sessions])


def _answerable_in(q: Question, conv: Conversation) -> bool:
    """Smoke runs on the first N sessions keep only questions whose whole gold evidence lies there."""
    kept = {s.index for s in conv.sessions}
    return bool(q.evidence_ids) and all(session_of(e) in kept for e in q.evidence_ids)


def _duplicate_map(questions: Sequence[Question]) -> dict[str, str]:
    """With dedupe off, later exact copies still point at their first occurrence (`is_duplicate_of`)."""
    first: dict[tuple[str, str, str], str] = {}
    out: dict[str, str] = {}
    for q in questions:
        key = (q.sample_id, q.question, q.gold)
        if key in first:
            out[q.id] = first[key]
        else:
            first[key] = q.id
    return out


def plan_run(
    data_path: str | Path,
    methods: Iterable[str] | None = None,
    conversations: Iterable[str] | None = None,
    categories: Iterable[int] = JUDGED_CATEGORIES,
    limit: int | None = None,
    concurrency: int = 1,
    include_adversarial: bool = False,
    dedupe: bool = True,
    max_sessions: int | None = None,
) -> Plan:
    """Validate the request and select the questions; raises `EvalError`/`ValueError` naming the problem."""
    path = Path(data_path)
    _check_numbers(limit, concurrency, max_sessions)
    chosen_methods = _check_methods(methods)
    cats = _check_categories(categories, include_adversarial)
    convs = _load_conversations(path)
    ids = [c.id for c in convs]
    wanted = list(dict.fromkeys(conversations)) if conversations else ids
    unknown = [c for c in wanted if c not in ids]
    if unknown:
        raise EvalError(f"unknown conversation {unknown[0]!r} in {path.name} (available: {', '.join(ids)})")
    # The limit is applied here rather than in build_question_set so it counts answerable questions.
    qset = build_question_set(convs, cats, dedupe=dedupe, include_adversarial=include_adversarial,
                              conversations=wanted)
    by_id = {c.id: _restrict_sessions(c, max_sessions) for c in convs if c.id in wanted}
    questions: list[Question] = []
    taken: dict[str, int] = {}
    for q in qset.questions:
        if max_sessions is not None and not _answerable_in(q, by_id[q.sample_id]):
            continue
        if limit is not None and taken.get(q.sample_id, 0) >= limit:
            continue
        taken[q.sample_id] = taken.get(q.sample_id, 0) + 1
        questions.append(q)
    if not questions:
        raise EvalError("the selection holds no questions (check --conversations, --categories, --max-sessions)")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return Plan(path, sha, chosen_methods, by_id, qset, questions,
                {} if dedupe else _duplicate_map(qset.questions), max_sessions, limit)


# --------------------------------------------------------------------------------------------- judge & names


def backbone_name(ctx: AllMethodsContext) -> str:
    from recollect.llm.models import model_name

    if ctx.chat_model is not None:
        return model_name(ctx.chat_model)
    s = get_settings()
    if s.llm_base_url:
        return s.llm_model or "gpt-4o-mini"  # the factory's default model name
    return f"embedded-{s.local_model}"


def _endpoint_judge_model(name: str) -> Any:
    from langchain_openai import ChatOpenAI

    s = get_settings()
    return ChatOpenAI(
        base_url=s.judge_base_url or None,
        api_key=s.judge_api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
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
    return LLMJudge(_endpoint_judge_model(judge), judge, cache_path=cache), judge


def namespace_for(sample_id: str, max_sessions: int | None) -> str:
    # A session-restricted run gets its own namespace so it never shares memory with a full one.
    return f"locomo-{sample_id}" + (f"-s{max_sessions}" if max_sessions else "")


def run_config(plan: Plan, judge_model: str | None, backbone: str, ctx: AllMethodsContext) -> dict[str, Any]:
    """What determines the results (concurrency and data_dir do not): hashed into the run id."""
    settings = {n: getattr(ctx, n) for n in setting_names(AllMethodsContext) if n != "data_dir"}
    return {
        "dataset_sha256": plan.dataset_sha256,
        "methods": sorted(plan.methods),
        "conversations": sorted(plan.conversations),
        "categories": list(plan.qset.categories),
        "limit": plan.limit,
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


def load_rows(path: Path, retry_errors: bool = True) -> list[dict[str, Any]]:
    """Rows already written; a truncated last line (an interrupted write) is dropped and the file rewritten.

    With `retry_errors`, rows whose method raised are dropped too, so a resumed run asks them again.
    """
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    rows: list[dict[str, Any]] = []
    changed = not path.read_text(encoding="utf-8").endswith("\n") and last >= 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == last:
                changed = True
                continue
            raise EvalError(f"{path}: line {i + 1} is not valid JSON ({exc.msg}); fix or delete the file") from exc
        if retry_errors and row.get("error"):
            changed = True
            continue
        rows.append(row)
    if changed:
        _rewrite_rows(path, rows)
    return rows


def _rewrite_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _asked_text(q: Question) -> tuple[str, tuple[str, str] | None]:
    if q.category != ADVERSARIAL_CATEGORY:
        return q.question, None
    prompt = adversarial_options(q, seed=ADVERSARIAL_SEED)
    return prompt.question, prompt.options


def _answer(method: str, q: Question, namespace: str, ctx: AllMethodsContext) -> tuple[str, dict[str, Any], str | None, float]:
    """(prediction, final state, error, wall time). Method errors become data; Ctrl-C still stops the run."""
    from recollect.runner import ask

    asked, options = _asked_text(q)
    start = time.monotonic()
    try:
        state = ask(namespace, asked, method, ctx)
    except Exception as exc:  # any method failure is recorded, scored as "" and counted (§5)
        return "", {}, f"{type(exc).__name__}: {exc}"[:2000], round(time.monotonic() - start, 3)
    prediction = str(state.get("answer") or "").strip()
    if options is not None:
        prediction = map_option_reply(prediction, options)
    return prediction, state, None, float(state.get("wall_time_s") or round(time.monotonic() - start, 3))


def _judge(judge: Any, q: Question, prediction: str) -> tuple[str | None, int | None, str | None]:
    if judge is None or q.category not in JUDGED_CATEGORIES:
        return None, None, None
    try:
        res = judge.judge(q.question, q.gold, prediction)
    except Exception as exc:  # a broken judge must not lose the answer; it is counted as a judge error
        return None, 0, f"{type(exc).__name__}: {exc}"
    return res.label, int(res.score), res.error


def aux_split(usage: dict[str, Any]) -> dict[str, Any]:
    """The auxiliary model's share (MGRetrieval's keyword model) of a question's usage, §5.

    MGRetrieval's Table 3 counts only the main LLM, so its comparable figures are `mg_tokens_main` and
    `n_llm_calls - n_llm_calls_aux`; `n_llm_calls` and `mg_tokens` stay the totals.
    """
    aux = [c for node, c in (usage.get("by_node") or {}).items() if node in AUX_LLM_NODES]
    aux_mg = sum(float(c.get("mg_tokens", 0.0)) for c in aux)
    return {"n_llm_calls_aux": sum(int(c.get("calls", 0)) for c in aux),
            "mg_tokens_main": round(float(usage.get("mg_tokens", 0.0)) - aux_mg, 2),
            "mg_tokens_aux": round(aux_mg, 2)}


def evaluate_pair(
    method: str, q: Question, plan: Plan, ctx: AllMethodsContext, judge: Any, ids: dict[str, str | None]
) -> dict[str, Any]:
    """One row of §7.1 (exactly those fields)."""
    namespace = namespace_for(q.sample_id, plan.max_sessions)
    prediction, state, error, wall = _answer(method, q, namespace, ctx)
    usage = state.get("usage") or {}
    retrieved = shown_turn_ids(state.get("trace") or [])
    supports = [str(t) for t in state.get("supports") or []]
    label, score, judge_error = _judge(judge, q, prediction)
    draft = draft_answer(state.get("trace") or [])
    row = {
        "run_id": ids["run_id"], "method": method, "backbone_model": ids["backbone_model"],
        "judge_model": ids["judge_model"], "sample_id": q.sample_id, "question_id": q.id,
        "category": q.category, "category_name": q.category_name, "question": q.question, "gold": q.gold,
        "prediction": prediction, "is_duplicate_of": q.is_duplicate_of or plan.duplicate_of.get(q.id),
        **score_prediction(prediction, q.gold, q.category),
        "judge_label": label, "judge_score": score, "judge_error": judge_error,
        "evidence_ids": list(q.evidence_ids), "retrieved_turn_ids": retrieved,
        "evidence_recall": evidence_recall(retrieved, q.evidence_ids),
        "session_recall": session_recall(retrieved, q.evidence_ids),
        "supports": supports, "support_recall": evidence_recall(supports, q.evidence_ids),
        "n_llm_calls": int(usage.get("calls", 0)), "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "cached_tokens": int(usage.get("cached_tokens", 0)), "token_source": token_source(usage),
        "mg_tokens": float(usage.get("mg_tokens", 0.0)), **aux_split(usage), "wall_time_s": wall,
        "error": error,
        # MGRetrieval's rounds, how many were speaker-only or capped, turns added by dense fill and
        # rounds whose 'sufficient' was ungrounded (None for other methods)
        **(round_kinds(state.get("trace") or []) if method == "mgretrieval" else dict.fromkeys(ROUND_KIND_FIELDS)),
        # The answer before a final span rewrite (MGRetrieval's rewrite, MRAgent's mra_answer_rewrite) and
        # its F1: what the rewrite did to each answer (None when the graph made no rewrite).
        "draft_answer": draft,
        "draft_locomo_f1": None if draft is None else score_prediction(draft, q.gold, q.category)["locomo_f1"],
    }
    return {k: row[k] for k in ROW_FIELDS}


def draft_answer(trace: list[dict[str, Any]]) -> str | None:
    """The `draft` of the last trace record that carries one beside its `answer` (the graph's rewrite step)."""
    for rec in reversed(trace):
        if rec.get("draft") is not None and "answer" in rec:
            return str(rec["draft"])
    return None


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
    show_progress: bool = True,
    plots: bool = True,
) -> Path:
    """Run the evaluation and write its report folder; returns that folder (default `runs/<run_id>`)."""
    from recollect.eval import report

    ctx = ctx or AllMethodsContext()
    plan = plan_run(data_path, methods, conversations, categories, limit, concurrency,
                    include_adversarial, dedupe, max_sessions)
    judge_obj, judge_model = resolve_judge(judge, ctx)
    backbone = backbone_name(ctx)
    config = run_config(plan, judge_model, backbone, ctx)
    run_id = make_run_id(config)
    out = Path(out_dir) if out_dir is not None else Path("runs") / run_id
    out.mkdir(parents=True, exist_ok=True)
    ids: dict[str, str | None] = {"run_id": run_id, "backbone_model": backbone, "judge_model": judge_model}

    jsonl = out / JSONL_NAME
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
