"""The `recollect` command.

Every failure the user can cause or fix (a bad file, an unknown namespace, an empty question, an
unusable data directory, a missing extra, a method whose memory is not built) is reported as one
`error:` line naming what is wrong, with exit status 2 (3: the model endpoint failed; 1: the stores
failed underneath, e.g. a full disk); nothing stored is touched by a failing command.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any

from recollect.cli_args import CLIError, _context
from recollect.graphs.registry import AllMethodsContext
from recollect.packaged import sample_dialogue_path
from recollect.settings import setting_names

# The demo asks each question with MemR3, HyMem and their one-shot baseline (rag), and checks the
# answer for the text the sample dialogue gives (case-insensitive).
DEMO_METHODS = ("memr3", "hymem", "rag")
DEMO_QUESTIONS = [
    ("Who looked after Maya's dog while she was hiking in the Dolomites?", "Priya"),
    ("Where does Maya work now?", "Oakwood"),
]


def _print_step(record: dict[str, Any], to_stderr: bool = False) -> None:
    from recollect.trace import format_step

    print("  " + format_step(record), flush=True, file=sys.stderr if to_stderr else sys.stdout)


def _step_printer(gold: list[str], to_stderr: bool = False) -> Any:
    """`_print_step`, plus a line when a step shows the model one of the gold evidence turns; on standard
    error with `--json`, so that standard output stays one JSON document."""

    def show(record: dict[str, Any]) -> None:
        _print_step(record, to_stderr)
        hit = [t for t in gold if t in set(record.get("shown_turn_ids") or ())]
        if hit:
            print(f"    gold evidence shown here: {', '.join(hit)}", flush=True,
                  file=sys.stderr if to_stderr else sys.stdout)

    return show


def _gold_ids(text: str | None) -> list[str]:
    ids = [t.strip() for t in (text or "").split(",") if t.strip()]
    if text is not None and not ids:
        raise CLIError("--gold-evidence: give turn ids separated by commas, e.g. D3:5,D7:2")
    return list(dict.fromkeys(ids))


# --- commands ----------------------------------------------------------------------------------


def cmd_setup(args: argparse.Namespace) -> int:
    from recollect.llm.local_runtime import setup

    path = setup(size=args.model)
    print(f"ready: {path}")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from recollect.dialogue.loaders import load_conversation
    from recollect.graphs.registry import BUILDERS, available_builders
    from recollect.ingestion import ingest_conversation
    from recollect.memory.workspace import open_workspace, validate_namespace

    methods = available_builders() if args.methods is None else \
        list(dict.fromkeys(m.strip() for m in args.methods.split(",") if m.strip()))
    if not methods:
        raise CLIError(f"--methods {args.methods!r} names no method (known: {', '.join(BUILDERS)})")
    unknown = [m for m in methods if m not in BUILDERS]
    if unknown:
        raise CLIError(f"unknown method(s) for ingest: {', '.join(unknown)} (known: {', '.join(BUILDERS)})")
    ctx = _context(args, methods)  # a builder is named as its method: --set takes the settings of those built
    validate_namespace(args.namespace)  # a bad namespace, data directory or embedder fails before any output
    path = Path(args.file)
    if args.file == "sample" and not path.exists():
        path = sample_dialogue_path()  # what `recollect demo` ingests, wherever recollect is installed
    # The file before the data directory: a bad dialogue leaves a fresh data directory uncreated.
    conversation = load_conversation(path, args.conversation)
    ws = open_workspace(ctx.data_dir)
    _ = ws.embeddings  # loads the embedder now: a missing `embeddings` extra is reported before the banner
    print(f"ingesting {conversation.id} ({len(conversation.sessions)} sessions, {len(conversation.turns)} turns) "
          f"into namespace {args.namespace!r}: {', '.join(methods)}")
    reports = ingest_conversation(conversation, args.namespace, ctx, methods=methods, show_progress=True)
    for r in reports:
        print(f"  {r.method:12s} sessions={r.sessions} llm_calls={r.llm_calls} cached={r.cached_calls} "
              f"embedded={r.embedded} tokens={r.prompt_tokens}+{r.completion_tokens} {r.seconds:.1f}s"
              + (f" fallbacks={len(r.fallbacks)}" if r.fallbacks else ""))
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from recollect.llm.structured import EndpointError
    from recollect.runner import ask, open_checkpointer, require_answerable

    ctx = _context(args, [args.method])
    question = " ".join(args.question).strip()
    if not question:
        raise CLIError("the question is empty")
    if args.thread is not None and not args.thread.strip():
        raise CLIError("--thread: give a thread id (leave the option out for a new thread)")
    require_answerable(args.namespace, args.method, ctx)  # before the checkpoint store is opened (created)
    gold = _gold_ids(args.gold_evidence)
    if args.trace:
        print(f"[{args.method}] {question}", flush=True, file=sys.stderr if args.json else sys.stdout)
    thread = args.thread or uuid.uuid4().hex[:12]
    try:
        result = ask(
            args.namespace, question, args.method, ctx,
            checkpointer=open_checkpointer(ctx.data_dir), thread_id=thread,
            on_step=_step_printer(gold, to_stderr=args.json) if args.trace else None,
        )
    except EndpointError as exc:
        raise EndpointError(f"{exc}\n(the run is checkpointed: add --thread {thread} to resume it)") from exc
    evidence: list[str] = []
    if gold:  # where the run lost each gold turn: memory, retrieval, packing or the answer step
        from recollect.eval.funnel import evidence_report

        evidence = evidence_report(args.method, ctx, args.namespace, result, gold)
    if args.json:
        keys = ("answer", "supports", "critical_memories", "usage", "thread_id", "wall_time_s")
        out = {k: result.get(k) for k in keys} | ({"gold_evidence": evidence} if gold else {})
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    for line in evidence:
        print(f"evidence {line}")
    usage = result.get("usage") or {}
    print(f"answer: {result.get('answer')}")
    print(f"supports: {', '.join(result.get('supports') or []) or '(none)'}")
    print(f"thread: {result['thread_id']}  llm_calls={usage.get('calls', 0)} "
          f"tokens={usage.get('prompt_tokens', 0)}+{usage.get('completion_tokens', 0)} "
          f"time={result.get('wall_time_s', 0):.1f}s")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from recollect.runner import history

    rows = history(args.thread_id, _context(args))
    question = None
    for r in rows:
        if r.get("question") and r["question"] != question:  # a thread holds a conversation of questions
            question = r["question"]
            print(f"question: {question}")
        nxt = ",".join(r["next"]) or "END"
        print(f"step {r['step']:>3}  {r['source'] or '':6s} next={nxt:10s} iteration={r['iteration']} "
              f"trace={r['n_trace']} checkpoint={r['checkpoint_id']}"
              + (f"  answer={r['answer']!r}" if r["answer"] else ""))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from recollect.service.serve import cmd_serve

    return cmd_serve(args)


def cmd_forget(args: argparse.Namespace) -> int:
    from recollect.runner import forget

    removed = forget(args.namespace, _context(args))
    print(f"forgot namespace {args.namespace!r}: {removed['documents']} documents, "
          f"{removed['collections']} vector collections, {len(removed['threads'])} threads")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from recollect.memory.workspace import migrate_data_dir

    data_dir = _context(args).data_dir
    done = migrate_data_dir(data_dir)
    if done is None:
        print(f"nothing to migrate: {data_dir} has no recollect.db")
    elif done.already:
        print(f"already migrated on {done.migrated_at}: {done.documents} documents, {done.cache_entries} cache "
              "entries; nothing copied")
    else:
        print(f"migrated {done.documents} documents and {done.cache_entries} cache entries from recollect.db into "
              "store.sqlite (no model called); RECOLLECT_DOC_STORE=langgraph reads them")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from recollect.dialogue.loaders import load_conversation
    from recollect.ingestion import ingest_conversation
    from recollect.llm.local_runtime import setup
    from recollect.runner import ask

    ctx = _context(args, DEMO_METHODS)
    if not os.environ.get("RECOLLECT_LLM_BASE_URL"):
        setup()
    sample = sample_dialogue_path()
    conversation = load_conversation(sample)
    print(f"\n== ingest {sample.name} ({len(conversation.sessions)} sessions, {len(conversation.turns)} turns) "
          "into namespace 'demo': memr3 (chunks, no LLM), hymem (one summary call per session)", flush=True)
    reports = ingest_conversation(conversation, "demo", ctx, methods=["memr3", "hymem"], show_progress=True)
    hymem = next(r for r in reports if r.method == "hymem")
    print(f"hymem: {hymem.sessions} sessions summarised, {hymem.llm_calls} LLM calls ({hymem.cached_calls} cached), "
          f"{hymem.seconds:.0f}s" + (f"; notes: {'; '.join(hymem.fallbacks)}" if hymem.fallbacks else ""), flush=True)
    right = 0
    for question, expected in DEMO_QUESTIONS:
        for method in DEMO_METHODS:
            print(f"\n== {method}: {question}", flush=True)
            result = ask("demo", question, method, ctx, on_step=_print_step)
            usage = result.get("usage") or {}
            ok = expected.lower() in str(result.get("answer") or "").lower()
            right += ok
            print(f"answer: {result.get('answer')}   supports: {', '.join(result.get('supports') or []) or '(none)'}"
                  f"   [{usage.get('calls', 0)} LLM calls, {result.get('wall_time_s', 0):.0f}s]", flush=True)
            print(f"expected: {expected}   {'right' if ok else 'WRONG'}", flush=True)
    print(f"\n== {right} of {len(DEMO_QUESTIONS) * len(DEMO_METHODS)} answers hold the expected text", flush=True)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    try:
        from recollect.eval.score import run_score
    except ModuleNotFoundError as exc:
        raise CLIError(f"`recollect score` needs the eval extra ({exc}): pip install 'recollect[eval]'") from None

    return run_score(args.file)


def cmd_namespaces(args: argparse.Namespace) -> int:
    from recollect.memory.build_status import KIND, describe
    from recollect.memory.read_only import read_namespaces, read_registry

    # read-only: it works on a data directory this user may not write, and creates nothing in a fresh one
    data_dir = _context(args).data_dir
    for info in read_namespaces(data_dir):
        print(f"{info.name}: conversation={info.conversation_id} sessions={len(info.sessions)} "
              f"embedder={info.embedder} built={','.join(info.built)}")
        # background builds `remember` queued
        for status in read_registry(data_dir, KIND, info.name).values():
            if status.get("state") != "done" or status.get("fallbacks"):
                print(f"  build {describe(status)}")
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    from dataclasses import fields

    ctx = AllMethodsContext()
    described = {f.name: f.metadata.get("description", "") for f in fields(AllMethodsContext)}
    for name in setting_names(AllMethodsContext):
        print(f"{name} = {getattr(ctx, name)!r}" + (f"  # {described[name]}" if described.get(name) else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from recollect.graphs.registry import METHODS as GRAPHS

    p = argparse.ArgumentParser(prog="recollect", description="Answer questions about long dialogue histories.")
    p.add_argument("--data-dir", help="data directory (default: $RECOLLECT_DATA_DIR or ~/.local/share/recollect)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("setup", help="install the llama.cpp runtime and the default model into the cache")
    s.add_argument("--model", choices=["1.5b", "0.5b"], default=None)
    s.set_defaults(func=cmd_setup)

    s = sub.add_parser("ingest", help="load a dialogue file into a namespace and build every method's memory")
    s.add_argument("file", help="a LoCoMo JSON or simple-format dialogue file; `sample` = the bundled sample "
                                "dialogue (when no file of that name exists)")
    s.add_argument("--namespace", "-n", required=True)
    s.add_argument("--conversation", help="conversation id when the file holds several")
    s.add_argument("--methods", help="comma-separated builders (default: all available)")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a runtime setting")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("ask", help="answer a question from a namespace")
    s.add_argument("question", nargs="+")
    s.add_argument("--namespace", "-n", required=True)
    s.add_argument("--method", "-m", default="memr3", choices=list(GRAPHS))
    s.add_argument("--trace", action="store_true", help="print each step as it happens")
    s.add_argument("--thread", help="checkpoint thread id (resume an interrupted run)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("--gold-evidence", metavar="IDS",
                   help="turn ids that hold the answer (D3:5,D7:2): say at which stage the run dropped each")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a runtime setting")
    s.set_defaults(func=cmd_ask)

    s = sub.add_parser("history", help="list the checkpoints of a thread (CLI and server threads)")
    s.add_argument("thread_id")
    s.set_defaults(func=cmd_history)

    s = sub.add_parser("forget", help="delete everything stored for a namespace, its threads included")
    s.add_argument("namespace")
    s.set_defaults(func=cmd_forget)

    s = sub.add_parser("migrate", help="copy the data directory's recollect.db into its LangGraph store "
                                       "(store.sqlite), once; no model is called")
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser("serve", help="run the LangGraph API server for every graph in langgraph.json")
    from recollect.service.serve import add_serve_arguments  # stdlib only: the CLI starts as fast

    add_serve_arguments(s)
    s.set_defaults(func=_serve)

    s = sub.add_parser("demo", help="set up, ingest the sample dialogue and answer questions with live traces")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a runtime setting")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("score", help="score predictions (JSONL: prediction, gold, category) offline")
    s.add_argument("file", help="JSONL file, or - for standard input")
    s.set_defaults(func=cmd_score)

    s = sub.add_parser("namespaces", help="list ingested namespaces")
    s.set_defaults(func=cmd_namespaces)

    s = sub.add_parser("settings", help="list runtime settings and their defaults")
    s.set_defaults(func=cmd_settings)
    _register_eval(sub)
    return p


def _register_eval(sub: Any) -> None:
    try:
        from recollect.eval.cli import register
    except ModuleNotFoundError:
        return
    register(sub)


def _storage_errors() -> tuple[type[BaseException], ...]:
    """The stores' errors: the file system's, SQLite's, and Postgres's when its optional packages are installed
    (RECOLLECT_POSTGRES_URI). A call, so psycopg is imported only when an error is being handled."""
    try:
        import psycopg
    except ImportError:
        return (OSError, sqlite3.Error)
    return (OSError, sqlite3.Error, psycopg.Error)


def main(argv: list[str] | None = None) -> int:
    from recollect.dialogue.models import DialogueError
    from recollect.llm.local_runtime import LocalModelError
    from recollect.llm.structured import EndpointError
    from recollect.memory.embeddings import EmbeddingsUnavailable
    from recollect.memory.workspace import NamespaceError
    from recollect.runner import ThreadError

    args = build_parser().parse_args(argv)
    if args.data_dir is not None and not args.data_dir.strip():  # else the default directory, silently
        print("error: --data-dir is empty: name a directory (or leave the option out for the default)",
              file=sys.stderr)
        return 2
    if args.data_dir:
        os.environ["RECOLLECT_DATA_DIR"] = args.data_dir
    try:
        return int(args.func(args) or 0)
    except (CLIError, DialogueError, NamespaceError, ThreadError, LocalModelError, EmbeddingsUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except EndpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except ValueError as exc:  # a bad setting, an unusable data directory (DataDirError)...
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except _storage_errors() as exc:  # the stores failed underneath (disk full,
        # a damaged database, a Postgres server gone or every pooled connection busy)
        print(f"error: storage failed ({type(exc).__name__}): {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
