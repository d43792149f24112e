"""Aggregation and report files of an eval run.

Aggregates are computed from the stored per-question rows only:
- per category: plain means with `n`; overall = micro-average over categories 1–4 (macro shown apart);
  the official overall including category 5 only when category 5 was run;
- LoCoMo F1 averages the per-question values rounded to 3 decimals (official-compatible); every other
  metric averages unrounded values; J averages only judged rows; recall skips rows without gold evidence;
- cost: means per question, wall time also as median and p90 (linear interpolation);
- tables print ×100 with 2 decimals, JSON keeps the unrounded fractions.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import logging
import statistics
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recollect.eval.funnel import FUNNEL_FIELDS, funnel_markdown
from recollect.eval.questions import CATEGORY_NAMES
from recollect.eval.reference import pct

log = logging.getLogger(__name__)

JUDGED = (1, 2, 3, 4)
MEAN_FIELDS = ("mem0_f1", "bleu1", "evidence_recall", "session_recall", "support_recall", *FUNNEL_FIELDS)
COST_FIELDS = ("n_llm_calls", "n_llm_calls_aux", "prompt_tokens", "completion_tokens", "total_tokens", "mg_tokens", "mg_tokens_main",
               "mg_tokens_aux")


def select_rows(rows: Iterable[dict[str, Any]], pairs: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the current selection, one per (method, question) in plan order (last write wins)."""
    latest = {(r["method"], r["question_id"]): r for r in rows}
    return [latest[(m, q.id)] for m, q in pairs if (m, q.id) in latest]


# --------------------------------------------------------------------------------------------- statistics


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _token_source(rows: Sequence[dict[str, Any]]) -> str | None:
    sources = {r["token_source"] for r in rows if r.get("n_llm_calls")}
    if not sources:
        return None
    return sources.pop() if len(sources) == 1 else "mixed"


def stats(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of one group of rows (a method × category cell, or an overall)."""
    # a verdict the judge failed to give is not a wrong answer: J averages real verdicts only
    judged = [r for r in rows if r.get("judge_score") is not None and not r.get("judge_error")]
    walls = [float(r["wall_time_s"]) for r in rows]
    out: dict[str, Any] = {
        "n": len(rows),
        "n_errors": sum(bool(r.get("error")) for r in rows),
        "n_judged": len(judged),
        "n_judge_errors": sum(bool(r.get("judge_error")) for r in rows),
        "J": _mean(r["judge_score"] for r in judged),
        "locomo_f1": _mean(r["locomo_f1_r3"] for r in rows),  # official: mean of rounded values
        "locomo_f1_unrounded": _mean(r["locomo_f1"] for r in rows),
        **{f: _mean(r.get(f) for r in rows) for f in MEAN_FIELDS},
        "n_recall_excluded": sum(r.get("evidence_recall") is None for r in rows),
        "retrieved_turns": _mean(len(r.get("retrieved_turn_ids") or []) for r in rows),
        **{f: _mean(_cost(r, f) for r in rows) or 0.0 for f in COST_FIELDS},
        "wall_time_s": {"mean": _mean(walls), "median": statistics.median(walls) if walls else None,
                        "p90": percentile(walls, 90)},
        "token_source": _token_source(rows),
    }
    return out


def _cost(row: dict[str, Any], field: str) -> float:
    if field == "total_tokens":
        return float(row["prompt_tokens"]) + float(row["completion_tokens"])
    if field == "mg_tokens_main" and field not in row:  # a row written before the main/aux split
        return float(row.get("mg_tokens", 0.0))
    return float(row.get(field) or 0.0)


def _macro(per_cat: dict[str, dict[str, Any]], key: str) -> float | None:
    vals = [per_cat[str(c)][key] for c in JUDGED if str(c) in per_cat and per_cat[str(c)][key] is not None]
    return sum(vals) / len(vals) if vals else None


# MGRetrieval's per-question round counts (row fields) summed per method in the summary.
KEYWORD_ROUND_FIELDS = {"rounds": "mg_rounds", "speaker_only": "mg_speaker_only_rounds",
                        "cap_truncated": "mg_cap_truncated_rounds", "filled_turns": "mg_filled_turns",
                        "ungrounded_sufficient": "mg_ungrounded_sufficient_rounds"}


def summarize_method(rows: Sequence[dict[str, Any]], categories: Sequence[int]) -> dict[str, Any]:
    per_cat = {str(c): stats([r for r in rows if r["category"] == c]) for c in categories}
    overall = stats([r for r in rows if r["category"] in JUDGED])
    overall["J_macro"] = _macro(per_cat, "J")
    overall["locomo_f1_macro"] = _macro(per_cat, "locomo_f1")
    if any(r["category"] == 5 for r in rows):  # the official LoCoMo overall includes category 5
        overall["locomo_f1_with_adversarial"] = _mean(r["locomo_f1_r3"] for r in rows)
    out: dict[str, Any] = {"categories": per_cat, "overall": overall}
    drafts = [r for r in rows if r["category"] in JUDGED and r.get("draft_locomo_f1") is not None]
    if drafts:  # what the final step (a span rewrite, a final answer call) did: F1 of the same answers before it
        from recollect.eval.intervals import bootstrap_mean

        out["rewrite"] = {"questions": len(drafts), "draft_locomo_f1": _mean(r["draft_locomo_f1"] for r in drafts),
                          "final_locomo_f1": _mean(r["locomo_f1"] for r in drafts),
                          "paired_difference": bootstrap_mean(
                              [float(r["locomo_f1"] or 0.0) - float(r["draft_locomo_f1"]) for r in drafts])}
    if any(r.get("mg_rounds") is not None for r in rows):  # MGRetrieval: how often a round degrades to dense
        out["keyword_rounds"] = {key: sum(int(r.get(f) or 0) for r in rows) for key, f in KEYWORD_ROUND_FIELDS.items()}
    return out


def summarize(rows: Sequence[dict[str, Any]], methods: Sequence[str], categories: Sequence[int]) -> dict[str, Any]:
    return {m: summarize_method([r for r in rows if r["method"] == m], categories) for m in methods}


# --------------------------------------------------------------------------------------------- metadata


def _git_commit(root: Path) -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")


def code_version() -> str:
    """The code that answers: the checkout's git commit, else the installed package's version."""
    commit = _git_commit(Path(__file__).resolve().parents[2])
    if commit:
        return commit
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "recollect " + version("recollect")
    except PackageNotFoundError:
        return "unknown"


def provenance(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """How many rows each (code, settings) pair made, most first: a resumed run says what it mixed."""
    counts: dict[tuple[Any, Any], int] = {}
    for r in rows:
        key = (r.get("code_commit"), r.get("settings_id"))
        counts[key] = counts.get(key, 0) + 1
    return [{"code_commit": c, "settings_id": s, "rows": n}
            for (c, s), n in sorted(counts.items(), key=lambda kv: -kv[1])]


def _split_name(path: Path) -> str:
    return {"locomo10.json": "full", "locomo_dev.json": "dev"}.get(path.name, "custom")


def run_metadata(plan: Any, ids: dict[str, Any], config: dict[str, Any], concurrency: int, ctx: Any,
                 ingest_log: dict[str, Any]) -> dict[str, Any]:
    """Everything the summary states about how the numbers were made."""
    import nltk

    from recollect.eval.judge import JUDGE_PROMPT_VERSION
    from recollect.eval.metrics import BLEU_TOKENIZER
    from recollect.llm.usage import TOKEN_ESTIMATOR
    from recollect.memory.embeddings import embedder_name
    from recollect.memory.workspace import open_workspace

    counts = {f"{c} {CATEGORY_NAMES[c]}": sum(q.category == c for q in plan.questions)
              for c in plan.qset.categories}
    return {
        "run_id": ids["run_id"],
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(Path(__file__).resolve().parents[2]),
        "dataset": {"name": plan.data_path.name, "sha256": plan.dataset_sha256, "split": _split_name(plan.data_path)},
        "conversations": list(plan.conversations),
        "max_sessions": plan.max_sessions,
        "limit_per_conversation": plan.limit,
        "stratified_sample": {"n": plan.sample, "seed": plan.seed} if getattr(plan, "sample", None) else None,
        "dedupe": plan.qset.dedupe,
        "include_adversarial": plan.qset.include_adversarial,
        "categories": list(plan.qset.categories),
        "question_counts": {"n_questions": len(plan.questions), "per_category": counts,
                            "n_duplicates_dropped": len(plan.qset.duplicates),
                            "n_no_evidence": sum(not q.evidence_ids for q in plan.questions)},
        "methods": list(plan.methods),
        "backbone_model": ids["backbone_model"],
        "embedder": embedder_name(open_workspace(ctx.data_dir).embeddings),
        "judge_model": ids["judge_model"],
        "judge_prompt_version": JUDGE_PROMPT_VERSION if ids["judge_model"] else None,
        "bleu_tokenizer": BLEU_TOKENIZER,
        "nltk_version": nltk.__version__,
        "token_estimator": TOKEN_ESTIMATOR,
        "locomo_f1": "official (mean of per-question values rounded to 3 decimals)",
        "concurrency": concurrency,
        "settings": config["context"],
        "memory_construction": ingest_log,
    }


# --------------------------------------------------------------------------------------------- markdown


def _num(v: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if v is None else fmt.format(v)


_HEAD = ("n", "err", "J", "LoCoMo-F1", "set-F1", "BLEU-1", "ev. recall", "sess. recall", "supp. recall",
         "retr. turns", "calls", "prompt tok", "compl. tok", "mg_tokens", "mg main", "mg aux", "wall mean s",
         "wall median s", "wall p90 s")


def _cells(s: dict[str, Any]) -> list[str]:
    w = s["wall_time_s"]
    return [str(s["n"]), str(s["n_errors"]), pct(s["J"]), pct(s["locomo_f1"]), pct(s["mem0_f1"]),
            pct(s["bleu1"]), pct(s["evidence_recall"]), pct(s["session_recall"]), pct(s["support_recall"]),
            _num(s["retrieved_turns"]), _num(s["n_llm_calls"], "{:.2f}"), _num(s["prompt_tokens"], "{:.0f}"),
            _num(s["completion_tokens"], "{:.0f}"), _num(s["mg_tokens"], "{:.0f}"),
            _num(s["mg_tokens_main"], "{:.0f}"), _num(s["mg_tokens_aux"], "{:.0f}"), _num(w["mean"], "{:.2f}"),
            _num(w["median"], "{:.2f}"), _num(w["p90"], "{:.2f}")]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _cross_method(summary: dict[str, Any], with_adv: bool) -> list[str]:
    head = ["method", "n", "err", "J", "J macro", "LoCoMo-F1", "F1 macro", "set-F1", "BLEU-1", "ev. recall",
            "supp. recall", "retr. turns", "calls", "tokens", "mg_tokens", "mg aux", "wall mean s", "token source"]
    if with_adv:
        head.insert(7, "LoCoMo-F1 incl. cat 5")
    rows = []
    for method, s in summary.items():
        o = s["overall"]
        row = [method, str(o["n"]), str(o["n_errors"]), pct(o["J"]), pct(o["J_macro"]), pct(o["locomo_f1"]),
               pct(o["locomo_f1_macro"]), pct(o["mem0_f1"]), pct(o["bleu1"]), pct(o["evidence_recall"]),
               pct(o["support_recall"]), _num(o["retrieved_turns"]), _num(o["n_llm_calls"], "{:.2f}"),
               _num(o["total_tokens"], "{:.0f}"), _num(o["mg_tokens"], "{:.0f}"), _num(o["mg_tokens_aux"], "{:.0f}"),
               _num(o["wall_time_s"]["mean"], "{:.2f}"), o["token_source"] or "–"]
        if with_adv:
            row.insert(7, pct(o.get("locomo_f1_with_adversarial")))
        rows.append(row)
    return _table(head, rows)


def _method_table(s: dict[str, Any]) -> list[str]:
    rows = [[f"{c} {CATEGORY_NAMES[int(c)]}", *_cells(cs)] for c, cs in s["categories"].items()]
    rows.append(["overall (micro, 1-4)", *_cells(s["overall"])])
    return _table(["category", *_HEAD], rows)


def _meta_lines(meta: dict[str, Any]) -> list[str]:
    qc = meta["question_counts"]
    judge = meta["judge_model"]
    comparable = judge in {"gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini"}
    return [
        f"- run id: `{meta['run_id']}`, date {meta['date']}, git commit `{meta['git_commit']}`",
        f"- dataset: `{meta['dataset']['name']}` (split {meta['dataset']['split']}), sha256 "
        f"`{meta['dataset']['sha256']}`; conversations {', '.join(meta['conversations'])}"
        + (f"; first {meta['max_sessions']} sessions only (questions whose gold evidence lies there)"
           if meta["max_sessions"] else ""),
        f"- questions: {qc['n_questions']} ({', '.join(f'{k}: {v}' for k, v in qc['per_category'].items())}); "
        f"dedupe={meta['dedupe']} ({qc['n_duplicates_dropped']} dropped), include_adversarial="
        f"{meta['include_adversarial']}, limit per conversation={meta['limit_per_conversation']}, "
        f"without gold evidence (excluded from recall)={qc['n_no_evidence']}"
        + (f"; a stratified sample of {meta['stratified_sample']['n']} by category, seed "
           f"{meta['stratified_sample']['seed']}" if meta.get("stratified_sample") else ""),
        f"- backbone: `{meta['backbone_model']}`; embedder `{meta['embedder']}`; concurrency {meta['concurrency']}",
        f"- judge: `{judge or 'none'}`" + (f", prompt `{meta['judge_prompt_version']}`" if judge else "")
        + ("" if not judge or comparable else
           " — **not comparable** to the papers' J (they used gpt-4o-mini, gpt-4.1 or gpt-4.1-mini)"),
        f"- LoCoMo-F1: {meta['locomo_f1']}; BLEU-1 tokenizer `{meta['bleu_tokenizer']}` (nltk "
        f"{meta['nltk_version']}); token estimator `{meta['token_estimator']}`",
        "- metrics ×100 with 2 decimals; overall = micro-average over categories 1-4; `err` = method errors "
        "(prediction \"\", scored, never dropped); cost columns are means per question",
        *(["- rows by the code and settings that made them: " + "; ".join(
            f"`{p['code_commit']}` / settings `{p['settings_id']}`: {p['rows']}" for p in meta["provenance"])]
          if meta.get("provenance") else []),
    ]


def _ingest_lines(log: dict[str, Any]) -> list[str]:
    rows = []
    for ns, entry in log.items():
        for r in entry.get("built", []):
            rows.append([ns, r["method"], str(r["sessions"]), str(r["llm_calls"]), str(r["cached_calls"]),
                         f"{r['prompt_tokens']}+{r['completion_tokens']}", str(r["embedded"]), f"{r['seconds']:.1f}"])
        for b in entry.get("reused", []):
            rows.append([ns, b, "–", "reused", "–", "–", "–", "–"])
    return _table(["namespace", "builder", "sessions", "LLM calls", "cached", "tokens", "embedded", "seconds"], rows)


def _keyword_round_lines(s: dict[str, Any]) -> list[str]:
    kr = s.get("keyword_rounds")
    if not kr:
        return []
    n = kr["rounds"]

    def share(key: str) -> str:
        return f"{kr[key]} ({pct(kr[key] / n)} %)" if n else str(kr[key])

    return [f"Retrieval rounds (all questions, dense rounds included): {n}; speaker-only groups {share('speaker_only')}; "
            f"truncated by the per-round cap {share('cap_truncated')}; 'sufficient' rejected as ungrounded "
            f"{share('ungrounded_sufficient')}; turns added by dense fill {kr.get('filled_turns', 0)}.", ""]


def _rewrite_lines(s: dict[str, Any]) -> list[str]:
    rw = s.get("rewrite")
    if not rw:
        return []
    diff = rw.get("paired_difference")
    paired = (f" (paired difference {100 * diff['mean']:+.2f} [{100 * diff['lo']:+.2f}, {100 * diff['hi']:+.2f}])"
              if diff else "")
    return [f"Final step, a span rewrite or a final answer call ({rw['questions']} answers): LoCoMo-F1 "
            f"{pct(rw['draft_locomo_f1'])} before it, {pct(rw['final_locomo_f1'])} after{paired}.", ""]


def summary_markdown(summary: dict[str, Any], meta: dict[str, Any], iv: dict[str, Any] | None = None) -> str:
    from recollect.eval.reference import reference_markdown

    with_adv = any("locomo_f1_with_adversarial" in s["overall"] for s in summary.values())
    lines = ["# LoCoMo evaluation", "", "## Run", "", *_meta_lines(meta), ""]
    if meta.get("ledger"):
        from recollect.eval.ledger import ledger_markdown

        lines += ledger_markdown(meta["ledger"])
    lines += ["## Overall (all methods)", "", *_cross_method(summary, with_adv), ""]
    if iv is not None:
        from recollect.eval.intervals import intervals_markdown

        lines += intervals_markdown(iv)
    lines += funnel_markdown(summary, meta["categories"])
    for method, s in summary.items():
        lines += [f"## {method}", "", *_method_table(s), "", *_keyword_round_lines(s), *_rewrite_lines(s)]
    lines += ["## Memory construction (per conversation, not counted in the question cost)", "",
              *_ingest_lines(meta["memory_construction"]), ""]
    lines += reference_markdown(summary, meta["backbone_model"], meta["judge_model"])
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------- files


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    from recollect.eval.ledger import LEDGER_FIELDS
    from recollect.eval.rows import ROW_FIELDS

    # text rows of this run, or the text-free rows of a `--rows` run (`recollect.eval.ledger`)
    names = LEDGER_FIELDS if rows and "fingerprint" in rows[0] else ROW_FIELDS
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(names), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in row.items()})


def write_reports(out: Path, rows: Sequence[dict[str, Any]], meta: dict[str, Any], methods: Sequence[str],
                  plots: bool = True) -> dict[str, Any]:
    """per_question.csv, summary.json, summary.md and (when matplotlib is installed) the plots."""
    from recollect.eval.intervals import intervals
    from recollect.eval.reference import REFERENCE_TABLES

    summary = summarize(rows, methods, meta["categories"])
    iv = intervals(rows, methods)
    meta = {**meta, "provenance": provenance(rows)}
    write_csv(out / "per_question.csv", rows)
    doc = {"metadata": meta, "methods": summary, "intervals": iv, "reference": REFERENCE_TABLES}
    (out / "summary.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary, meta, iv), encoding="utf-8")
    if plots:
        from recollect.eval.intervals import write_accuracy_vs_seconds
        from recollect.eval.plots import write_plots

        try:
            write_plots(out, summary, meta["judge_model"] is not None)
            write_accuracy_vs_seconds(out / "accuracy_vs_seconds.png", iv)
        except ImportError as exc:  # matplotlib is the optional `plots` extra
            log.warning("plots skipped (install the `plots` extra): %s", exc)
    return doc
