"""Shared pieces of the LoCoMo dev-slice benchmark scripts (`*_cost.py`, `memr3_vs_rag.py`).

A slice is the first N sessions of one conversation and the first K questions of the chosen
categories whose gold evidence lies inside those sessions. LoCoMo is CC BY-NC: it is read at run
time from `--data` and never copied into the project, so report rows carry a question's id
(`conv-26#12`) and category, never its text or gold answer (`question_fields`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recollect.dialogue.models import Conversation
    from recollect.eval.questions import Question
    from recollect.memory.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "benchmarks" / "reports"
SCRIPTED_MODEL = "scripted (NOT a measurement)"
SCRIPTED_BANNER = [
    "**Plumbing check with a scripted model: none of these numbers is a measurement. Re-run the command",
    "without `--scripted` against the real model to produce the report.**",
    "",
]


def load_slice(data_path: str | Path, conv: str, sessions: int, questions: int,
               categories: Iterable[int] = (1, 2, 3, 4)) -> tuple[Conversation, list[Question]]:
    """Conversation `conv` cut to its first `sessions` sessions, and the first `questions` questions of
    `categories` whose gold evidence is non-empty and lies inside the kept sessions."""
    from recollect.dialogue.loaders import load_conversation
    from recollect.eval.questions import build_question_set

    conversation = load_conversation(data_path, conv)
    conversation = replace(conversation, sessions=conversation.sessions[:sessions])
    in_slice = {t.id for t in conversation.turns}
    qset = build_question_set(data_path, categories=tuple(categories), conversations=[conv])
    chosen = [q for q in qset.questions if q.evidence_ids and set(q.evidence_ids) <= in_slice]
    return conversation, chosen[:questions]


def make_workspace(data_dir: str | None, prefix: str, scripted: bool = False) -> tuple[Workspace, str]:
    """A registered workspace in `data_dir` (a fresh temporary one when None) and its directory.

    Scripted runs keep the embedder from the environment (`RECOLLECT_EMBEDDER=hash` offline); real
    runs use MiniLM.
    """
    from recollect.memory.workspace import Workspace, register_workspace

    data_dir = data_dir or tempfile.mkdtemp(prefix=prefix)
    if scripted:
        return register_workspace(Workspace(data_dir)), data_dir
    from recollect.memory.embeddings import MiniLMEmbeddings

    return register_workspace(Workspace(data_dir, embeddings=MiniLMEmbeddings())), data_dir


def model_label(ctx: Any, scripted: bool, role: str | None = None) -> str:
    """The model name for a report, or a label that says a scripted run measures nothing."""
    if scripted:
        return SCRIPTED_MODEL if role is None else "scripted"
    from recollect.llm.models import get_chat_model, model_name

    return model_name(get_chat_model(ctx) if role is None else get_chat_model(ctx, role=role))


def question_fields(q: Question, answer: Any) -> dict[str, Any]:
    """A report row's identity and score: id, category, LoCoMo F1 and answer length; no dataset text."""
    from recollect.eval.metrics import locomo_f1

    return {"id": q.id, "category": q.category_label,
            "locomo_f1": round(locomo_f1(answer, q.gold, q.category), 3),
            "answer_words": len(str(answer).split())}


def question_row(q: Question, out: dict[str, Any], start: float, **fields: Any) -> dict[str, Any]:
    """One cost-report row: identity and score, supports, the script's own `fields`, evidence recall over
    the turns the method showed the model, and the seconds since `start`. Only ids: LoCoMo (CC BY-NC)
    text, questions and golds included, stays out of the project."""
    from recollect.trace import shown_turn_ids

    return {
        **question_fields(q, out["answer"]), "supports": out.get("supports") or [], **fields,
        "evidence_recall": evidence_recall(q, shown_turn_ids(out.get("trace") or [])),
        "seconds": round(time.monotonic() - start, 1),
    }


def usage_fields(usage: dict[str, Any]) -> dict[str, Any]:
    """A question's LLM calls and tokens (total and per node) from the run's usage record."""
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {
        "calls": usage.get("calls", 0), "prompt_tokens": prompt, "completion_tokens": completion,
        "tokens": prompt + completion, "estimated_calls": usage.get("estimated_calls", 0),
        "by_node": {k: {"calls": v["calls"], "tokens": v["prompt_tokens"] + v["completion_tokens"]}
                    for k, v in (usage.get("by_node") or {}).items()},
    }


def report_identity(script: str, ctx: Any, args: argparse.Namespace, ws: Workspace, conv: Conversation,
                    questions: list[Question], settings: Iterable[str]) -> dict[str, Any]:
    """The report fields every cost script shares: command, model, embedder, slice and settings
    (the script's `settings`, then any other setting a `--set` changed)."""
    settings = list(settings)
    settings += [k for k in getattr(args, "overrides", {}) if k not in settings]
    return {
        "command": command_line(script),
        "model": model_label(ctx, args.scripted),
        "embedder": type(ws.embeddings).__name__,
        "slice": {"conversation": args.conv, "sessions": len(conv.sessions), "turns": len(conv.turns),
                  "questions": [q.id for q in questions]},
        "settings": {k: getattr(ctx, k) for k in settings},
    }


def evidence_recall(q: Question, shown: Iterable[str]) -> float:
    """Share of the question's gold evidence turns that the method showed the model."""
    return len(set(q.evidence_ids) & set(shown)) / len(q.evidence_ids)


def command_line(script: str) -> str:
    """The command as run, for the report's `Command:` line."""
    return " ".join(["python", f"benchmarks/{script}", *sys.argv[1:]])


def add_slice_args(p: argparse.ArgumentParser, sessions: int = 3, questions: int = 3) -> None:
    """--data, --conv, --sessions, --questions."""
    p.add_argument("--data", required=True, help="path to a LoCoMo JSON file (e.g. locomo_dev.json)")
    p.add_argument("--conv", default="conv-26")
    p.add_argument("--sessions", type=int, default=sessions)
    p.add_argument("--questions", type=int, default=questions)


def add_run_args(p: argparse.ArgumentParser, namespace: str, report: str) -> None:
    """--namespace, --data-dir, --structured-method, --scripted and --out for a cost script."""
    p.add_argument("--namespace", default=namespace)
    p.add_argument("--data-dir", default=None, help="workspace directory (default: a fresh temporary one)")
    p.add_argument("--structured-method", default=None)
    p.add_argument("--scripted", action="store_true", help="fake model: checks the plumbing, measures nothing")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a runtime setting as `recollect --set` does (e.g. mg_ingest_format=json); "
                        "it is recorded in the report's settings")
    p.add_argument("--out", default=str(REPORTS / report),
                   help="output path without extension (.json and .md are written)")


def setting_overrides(p: argparse.ArgumentParser, pairs: list[str]) -> dict[str, Any]:
    """The `--set KEY=VALUE` pairs as AllMethodsContext overrides (values parsed as JSON when they can be, as the
    CLI's `--set`); an unknown setting or a bad value is an argument error before any work is done."""
    from recollect.cli_args import CLIError, _parse_sets
    from recollect.graphs.registry import AllMethodsContext
    from recollect.settings import ContextError

    try:
        overrides = _parse_sets(pairs)
        if "data_dir" in overrides:
            raise CLIError("--set: use --data-dir for the workspace directory")
        AllMethodsContext().with_overrides(**overrides)  # AllMethodsContext checks every value (type, range, choices)
    except (CLIError, ContextError) as e:
        p.error(str(e))
    return overrides


def script_context(args: argparse.Namespace, data_dir: str, scripted_model: Any, **flags: Any) -> Any:
    """The run's AllMethodsContext: `scripted_model()` as the model with `--scripted` (else the configured one),
    then the script's own flags that were given (`None` = not given; `--structured-method` included),
    then every `--set`."""
    from recollect.graphs.registry import AllMethodsContext

    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted_model()) if args.scripted else AllMethodsContext(data_dir=data_dir)
    flags = {"structured_method": args.structured_method, **flags}
    overrides = {k: v for k, v in flags.items() if v is not None} | getattr(args, "overrides", {})
    return ctx.with_overrides(**overrides) if overrides else ctx


def check_scripted_ingestion(args: argparse.Namespace, build: Any) -> None:
    """Stop a `--scripted` run whose ingestion fell back. The fake model answers every ingestion call in
    the format the prompt and schema ask for, so a fallback means the fake and the builder no longer
    agree (a reply format changed) and the run would check rule-based fallbacks instead of the plumbing."""
    if args.scripted and build.fallbacks:
        raise SystemExit(f"scripted run: ingestion fell back {len(build.fallbacks)} time(s); the fake model's "
                         "replies no longer fit the builder: " + "; ".join(f[:160] for f in build.fallbacks[:3]))


def write_report(out: str | Path, report: dict[str, Any], markdown: str) -> None:
    """Write `out`.json and `out`.md (`out` is a path without extension) and print the markdown."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown, end="" if markdown.endswith("\n") else "\n")


def mean_of(rows: list[dict[str, Any]], key: str, digits: int | None = 2) -> float:
    """The mean of `key` over report rows (booleans count as 0/1); 0 for no rows. `digits=None` → an int."""
    value = sum(float(r[key]) for r in rows) / max(1, len(rows))
    return round(value) if digits is None else round(value, digits)


def report_head(rep: dict[str, Any], title: str, models: str | None = None) -> list[str]:
    """The opening lines every cost report shares: title, command, scripted banner, model and slice."""
    sl = rep["slice"]
    return [
        f"# {title}",
        "",
        f"Command: `{rep['command']}`",
        "",
        *(SCRIPTED_BANNER if rep["model"].startswith("scripted") else []),
        f"{models or 'Model: ' + rep['model']}; embedder: {rep['embedder']}; slice: {sl['conversation']}, "
        f"first {sl['sessions']} sessions ({sl['turns']} turns), {len(sl['questions'])} questions with gold "
        "evidence inside them.",
        f"Settings: {json.dumps(rep['settings'])}",
        "",
    ]


def cost_script_main(
    doc: str,
    run: Any,
    markdown: Any,
    *,
    namespace: str,
    report: str,
    extra_args: Any = None,
) -> None:
    """Parse the shared arguments (plus `extra_args(parser)`), run, and write `report`.{json,md}."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    add_slice_args(p)
    add_run_args(p, namespace=namespace, report=report)
    if extra_args is not None:
        extra_args(p)
    args = p.parse_args()
    args.overrides = setting_overrides(p, args.set)
    rep = run(args)
    write_report(args.out, rep, markdown(rep))
