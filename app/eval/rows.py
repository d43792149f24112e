"""One row per (method, question): the answer, its scores and its cost, and the row file's reading and writing.

The row's fields are `ROW_FIELDS` (specs of the eval: the README's "Evaluating on LoCoMo"); a method may
add its own columns (`METHOD_FIELDS`, filled by the method's `eval_fields(state)`). Rows are read
from the graph's typed state (`answer`, `supports`, `shown_turn_ids`, `answer_before_rewrite`, `usage`),
never from its trace records.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recollect.eval.funnel import funnel_fields
from recollect.eval.metrics import evidence_recall, score_prediction, session_recall
from recollect.eval.plan import JUDGED_CATEGORIES, EvalError, Plan, namespace_for
from recollect.eval.questions import ADVERSARIAL_CATEGORY, Question, adversarial_options, map_option_reply
from recollect.graphs.registry import AllMethodsContext, aux_llm_nodes, method_eval_fields
from recollect.llm.usage import token_source

ADVERSARIAL_SEED = 0  # option order of category-5 prompts (seeded per question)
# Columns a method fills from its own state (MGRetrieval's round kinds); None for every other method.
METHOD_FIELDS = ("mg_rounds", "mg_speaker_only_rounds", "mg_cap_truncated_rounds", "mg_filled_turns",
                 "mg_ungrounded_sufficient_rounds")
ROW_FIELDS = (
    "run_id", "method", "backbone_model", "judge_model", "sample_id", "question_id", "category",
    "category_name", "question", "gold", "prediction", "is_duplicate_of", "locomo_f1", "locomo_f1_r3",
    "mem0_f1", "bleu1", "judge_label", "judge_score", "judge_error", "evidence_ids", "retrieved_turn_ids",
    "evidence_recall", "session_recall", "supports", "support_recall",
    # the evidence funnel (recollect.eval.funnel): gold turns in memory, retrieved, shown, cited, and the last
    # stage each gold turn reached
    "evidence_in_memory", "evidence_retrieved", "evidence_shown", "evidence_cited", "evidence_stages", "n_llm_calls", "n_llm_calls_aux",
    "prompt_tokens", "completion_tokens", "cached_tokens", "token_source", "mg_tokens", "mg_tokens_main", "mg_tokens_aux", "wall_time_s", "error",
    # where the seconds went: the server's prefill and decode (llama.cpp's timings, over the timed calls),
    # the client's seconds in model calls, and retrieval (recollect.memory.clock); the rest is graph overhead
    "prefill_s", "decode_s", "timed_calls", "llm_s", "retrieval_s",
    "mg_rounds", "mg_speaker_only_rounds", "mg_cap_truncated_rounds", "mg_filled_turns", "mg_ungrounded_sufficient_rounds",
    "draft_answer", "draft_locomo_f1",
    # provenance: the code (git commit, "-dirty" with uncommitted changes, or the installed version) and the
    # settings (a hash of the run's context settings) this row was made with; a resumed run may mix them
    "code_commit", "settings_id",
)
JSONL_NAME = "per_question.jsonl"


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
    except Exception as exc:  # any method failure is recorded, scored as "" and counted
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
    """The auxiliary model's share (MGRetrieval's keyword model) of a question's usage,

    MGRetrieval's Table 3 counts only the main LLM, so its comparable figures are `mg_tokens_main` and
    `n_llm_calls - n_llm_calls_aux`; `n_llm_calls` and `mg_tokens` stay the totals.
    """
    aux = [c for node, c in (usage.get("by_node") or {}).items() if node in aux_llm_nodes()]
    aux_mg = sum(float(c.get("mg_tokens", 0.0)) for c in aux)
    return {"n_llm_calls_aux": sum(int(c.get("calls", 0)) for c in aux),
            "mg_tokens_main": round(float(usage.get("mg_tokens", 0.0)) - aux_mg, 2),
            "mg_tokens_aux": round(aux_mg, 2)}


def evaluate_pair(
    method: str, q: Question, plan: Plan, ctx: AllMethodsContext, judge: Any, ids: dict[str, str | None]
) -> dict[str, Any]:
    """One row of (exactly those fields)."""
    namespace = namespace_for(q.sample_id, plan.max_sessions)
    prediction, state, error, wall = _answer(method, q, namespace, ctx)
    usage = state.get("usage") or {}
    retrieved = [str(t) for t in state.get("shown_turn_ids") or []]
    supports = [str(t) for t in state.get("supports") or []]
    label, score, judge_error = _judge(judge, q, prediction)
    draft = state.get("answer_before_rewrite")
    row = {
        "run_id": ids["run_id"], "method": method, "backbone_model": ids["backbone_model"],
        "judge_model": ids["judge_model"], "sample_id": q.sample_id, "question_id": q.id,
        "code_commit": ids.get("code_commit"), "settings_id": ids.get("settings_id"),
        "category": q.category, "category_name": q.category_name, "question": q.question, "gold": q.gold,
        "prediction": prediction, "is_duplicate_of": q.is_duplicate_of or plan.duplicate_of.get(q.id),
        **score_prediction(prediction, q.gold, q.category),
        "judge_label": label, "judge_score": score, "judge_error": judge_error,
        "evidence_ids": list(q.evidence_ids), "retrieved_turn_ids": retrieved,
        "evidence_recall": evidence_recall(retrieved, q.evidence_ids),
        "session_recall": session_recall(retrieved, q.evidence_ids),
        "supports": supports, "support_recall": evidence_recall(supports, q.evidence_ids),
        **funnel_fields(method, ctx, namespace, state, list(q.evidence_ids)),
        "n_llm_calls": int(usage.get("calls", 0)), "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "cached_tokens": int(usage.get("cached_tokens", 0)), "token_source": token_source(usage),
        "mg_tokens": float(usage.get("mg_tokens", 0.0)), **aux_split(usage), "wall_time_s": wall,
        "error": error,
        "prefill_s": round(float(usage.get("prefill_s", 0.0)), 3), "decode_s": round(float(usage.get("decode_s", 0.0)), 3),
        "timed_calls": int(usage.get("timed_calls", 0)), "llm_s": round(float(usage.get("latency_s", 0.0)), 3),
        "retrieval_s": None if error else round(float(state.get("retrieval_s") or 0.0), 3),
        # MGRetrieval's rounds, how many were speaker-only or capped, turns added by dense fill and
        # rounds whose 'sufficient' was ungrounded (None for other methods)
        **dict.fromkeys(METHOD_FIELDS), **method_eval_fields(method, state),
        # The answer before a final span rewrite (MGRetrieval's rewrite, MRAgent's mra_answer_rewrite) and
        # its F1: what the rewrite did to each answer (None when the graph made no rewrite).
        "draft_answer": draft,
        "draft_locomo_f1": None if draft is None else score_prediction(draft, q.gold, q.category)["locomo_f1"],
    }
    return {k: row[k] for k in ROW_FIELDS}
