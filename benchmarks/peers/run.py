"""Run mem0 and LangMem on the same LoCoMo questions as `recollect eval`, scored by our eval code.

    python -m benchmarks.peers --data locomo_dev.json --conversations conv-26 --max-sessions 1 \
        --limit 2 --out runs/my-eval            # the folder of a `recollect eval` run, or a new one

The question selection is `recollect eval`'s own (`plan_run`: --data, --conversations, --categories,
--limit, --sample, --seed, --max-sessions, --include-adversarial, --no-dedupe), and so is the row:
`per_question.jsonl` gets one row per (peer, question) with exactly the eval's fields (`ROW_FIELDS`),
method `mem0` / `langmem`. Written into the folder of an eval run, the rows sit beside the graphs' rows
and `summary.md`/`.json` is rewritten with the eval's methods and the peers in one table. Re-running
resumes: sessions already ingested and rows already written are skipped (rows that failed are retried).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/peers/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from langchain_core.language_models import BaseChatModel
from tqdm import tqdm

from benchmarks.peers.answer import answer_question
from benchmarks.peers.base import Peer, Provenance
from benchmarks.peers.llm import Endpoint, UsageMeter, backbone, peer_model
from recollect.dialogue.models import Conversation
from recollect.eval.metrics import score_prediction, session_of
from recollect.eval.plan import JUDGED_CATEGORIES, EvalError, Plan, namespace_for, plan_run
from recollect.eval.questions import ADVERSARIAL_CATEGORY, Question, adversarial_options, map_option_reply
from recollect.eval.rows import ADVERSARIAL_SEED, JSONL_NAME, METHOD_FIELDS, ROW_FIELDS, load_rows
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.usage import merge_usage, token_source
from recollect.prompts import prompt_hash

PEERS = ("mem0", "langmem")
LIBRARIES = {"mem0": "mem0ai", "langmem": "langmem"}
STATE = "peers"  # <out>/peers/<peer>/: the library's store, and per namespace its sessions log and provenance
CONFIG_NAME = "peers_config.json"

PeerFactory = Callable[[str, Path, UsageMeter], Peer]


# --------------------------------------------------------------------------------------------- configuration


def library_version(peer: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(LIBRARIES.get(peer, peer))
    except PackageNotFoundError:
        return None


def peer_settings(peer: str, top_k: int, peer_max_tokens: int, dims: int = 384) -> dict[str, Any]:
    """What determines a peer's rows: its library, configuration, k, and our answer prompt."""
    from benchmarks.peers import langmem_peer, mem0_peer

    described = {"mem0": mem0_peer.describe_config, "langmem": langmem_peer.describe_config}.get(peer)
    return {"library": LIBRARIES.get(peer, peer), "version": library_version(peer),
            "config": described(dims) if described else {"custom": peer},
            "top_k": top_k, "peer_max_tokens": peer_max_tokens,
            "answer_prompt": "baselines/answer " + prompt_hash("baselines", "answer"),
            "answer_absolute_dates": AllMethodsContext().answer_absolute_dates}


def settings_id(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def default_factory(ep: Endpoint, peer_max_tokens: int) -> PeerFactory:
    """Builds the real peers on the backbone's endpoint and our embeddings."""
    from recollect.memory.embeddings import DIM, get_embeddings

    def make(name: str, store_dir: Path, meter: UsageMeter) -> Peer:
        if name == "mem0":
            from benchmarks.peers.mem0_peer import Mem0Peer

            chat = peer_model(ep, meter, node="mem0", max_tokens=peer_max_tokens, json_mode=True)
            return Mem0Peer(store_dir, chat, get_embeddings(), DIM)
        if name == "langmem":
            from benchmarks.peers.langmem_peer import LangMemPeer

            chat = peer_model(ep, meter, node="langmem", max_tokens=peer_max_tokens)
            return LangMemPeer(store_dir, chat, get_embeddings(), DIM)
        raise EvalError(f"unknown peer {name!r} (choose from: {', '.join(PEERS)})")

    return make


# --------------------------------------------------------------------------------------------- ingestion


def _sessions_log(store: Path, namespace: str) -> Path:
    return store / f"{namespace}.sessions.jsonl"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _append_jsonl(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def ingest_conversation(peer: Peer, meter: UsageMeter, conv: Conversation, namespace: str, store: Path,
                        show_progress: bool = False) -> list[dict[str, Any]]:
    """Feed every session not yet logged to the peer, in order; one log record per session."""
    log = _sessions_log(store, namespace)
    done = {r["session"] for r in _read_jsonl(log)}
    prov = Provenance(store / f"{namespace}.provenance.json")
    out = []
    todo = [s for s in conv.sessions if s.index not in done]
    for session in tqdm(todo, desc=f"{peer.name} ingest {namespace}", unit="session", disable=not show_progress):
        meter.take()
        start = time.monotonic()
        stored = peer.ingest_session(namespace, session)
        seconds = round(time.monotonic() - start, 3)
        usage, from_text, cut = meter.take()
        prov.apply(session, stored.events)
        prov.save()
        events = {e: sum(1 for _, ev in stored.events if ev == e) for e in ("ADD", "UPDATE", "DELETE")}
        record = {"peer": peer.name, "namespace": namespace, "session": session.index,
                  "date_time": session.date_time, "turns": len(session.turns), "seconds": seconds,
                  "llm_calls": int(usage.get("calls", 0)), "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                  "completion_tokens": int(usage.get("completion_tokens", 0)),
                  "cached_tokens": int(usage.get("cached_tokens", 0)), "token_source": token_source(usage),
                  "tool_calls_from_text": from_text, "replies_cut_at_cap": cut, "events": events, "stored_after": peer.count(namespace),
                  "errors": stored.errors}
        _append_jsonl(log, record)
        out.append(record)
    return out


# --------------------------------------------------------------------------------------------- rows


def _asked(q: Question) -> tuple[str, tuple[str, str] | None]:
    if q.category != ADVERSARIAL_CATEGORY:
        return q.question, None
    prompt = adversarial_options(q, seed=ADVERSARIAL_SEED)  # the eval's two-option format and seed
    return prompt.question, prompt.options


def _session_recall(sessions: Iterable[int], gold_ids: Sequence[str]) -> float | None:
    gold = {s for i in gold_ids if (s := session_of(i)) is not None}
    if not gold:
        return None
    return len(gold & set(sessions)) / len(gold)


def _judge(judge: Any, q: Question, prediction: str) -> tuple[str | None, int | None, str | None]:
    if judge is None or q.category not in JUDGED_CATEGORIES:
        return None, None, None
    try:
        res = judge.judge(q.question, q.gold, prediction)
    except Exception as exc:  # as in the eval: a broken judge never loses the answer
        return None, 0, f"{type(exc).__name__}: {exc}"
    return res.label, int(res.score), res.error


def answer_row(peer: Peer, meter: UsageMeter, q: Question, plan: Plan, prov: Provenance, model: BaseChatModel,
               ids: dict[str, Any], *, top_k: int, judge: Any = None, structured_method: str = "auto",
               absolute_dates: bool = True) -> dict[str, Any]:
    """One row with exactly the eval's fields; a failure is recorded in `error` and scored as ""."""
    namespace = namespace_for(q.sample_id, plan.max_sessions)
    asked, options = _asked(q)
    start = time.monotonic()
    meter.take()
    error, prediction, found, cited, usage = None, "", [], [], {}
    try:
        found = peer.search(namespace, asked, top_k)
        search_usage = meter.take().usage  # a peer's own LLM calls at question time (none for mem0 / LangMem)
        ans = answer_question(model, asked, found, prov, node=peer.name, structured_method=structured_method,
                              absolute=absolute_dates)
        usage = merge_usage(search_usage, ans.usage)
        prediction, cited = ans.text.strip(), ans.cited
    except Exception as exc:  # any peer or endpoint failure is data, as in the eval
        error = f"{type(exc).__name__}: {exc}"[:2000]
        usage = merge_usage(meter.take().usage, usage)
    if options is not None:
        prediction = map_option_reply(prediction, options)
    wall = round(time.monotonic() - start, 3)
    label, score, judge_error = _judge(judge, q, prediction)
    shown_sessions = sorted({s for f in found for s in prov.sessions(f.id)})
    row = {
        "run_id": ids["run_id"], "method": peer.name, "backbone_model": ids["backbone_model"],
        "judge_model": ids["judge_model"], "sample_id": q.sample_id, "question_id": q.id,
        "code_commit": ids.get("code_commit"), "settings_id": ids.get("settings_id"),
        "category": q.category, "category_name": q.category_name, "question": q.question, "gold": q.gold,
        "prediction": prediction, "is_duplicate_of": q.is_duplicate_of or plan.duplicate_of.get(q.id),
        **score_prediction(prediction, q.gold, q.category),
        "judge_label": label, "judge_score": score, "judge_error": judge_error,
        # A peer stores memories, not turns: no turn ids to recall (null), sessions from the provenance.
        "evidence_ids": list(q.evidence_ids), "retrieved_turn_ids": [],
        "evidence_recall": None, "session_recall": _session_recall(shown_sessions, q.evidence_ids),
        "supports": cited, "support_recall": None,
        # the evidence funnel counts gold turns at each stage; a peer has no turn ids at any stage
        "evidence_in_memory": None, "evidence_retrieved": None, "evidence_shown": None, "evidence_cited": None,
        "evidence_stages": None,
        "n_llm_calls": int(usage.get("calls", 0)), "n_llm_calls_aux": 0,
        "prompt_tokens": int(usage.get("prompt_tokens", 0)), "completion_tokens": int(usage.get("completion_tokens", 0)),
        "cached_tokens": int(usage.get("cached_tokens", 0)), "token_source": token_source(usage),
        "mg_tokens": float(usage.get("mg_tokens", 0.0)), "mg_tokens_main": float(usage.get("mg_tokens", 0.0)),
        "mg_tokens_aux": 0.0, "wall_time_s": wall, "error": error,
        **dict.fromkeys(METHOD_FIELDS), "draft_answer": None, "draft_locomo_f1": None,
    }
    # Exactly the eval's columns; one the eval adds later is null here until the peers fill it.
    return {k: row.get(k) for k in ROW_FIELDS}


# --------------------------------------------------------------------------------------------- the run


def _eval_config(out: Path) -> dict[str, Any] | None:
    path = out / "run_config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _judge_choice(judge: str, eval_cfg: dict[str, Any] | None, backbone_id: str) -> str:
    """`auto`: the judge of the eval run in the folder (its rows and ours must agree), else none."""
    if judge != "auto":
        return judge
    judged = (eval_cfg or {}).get("judge_model")
    if not judged:
        return "none"
    return "local" if judged == backbone_id else str(judged)


def _peers_config(out: Path) -> dict[str, Any]:
    path = out / CONFIG_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def run_peers(
    data_path: str | Path,
    peers: Sequence[str] = PEERS,
    conversations: Iterable[str] | None = None,
    categories: Iterable[int] = JUDGED_CATEGORIES,
    limit: int | None = None,
    *,
    include_adversarial: bool = False,
    dedupe: bool = True,
    max_sessions: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    judge: Any = "auto",
    out_dir: str | Path | None = None,
    top_k: int = 5,
    peer_max_tokens: int | None = None,
    ctx: AllMethodsContext | None = None,
    answer_model: BaseChatModel | None = None,
    make_peer: PeerFactory | None = None,
    show_progress: bool = True,
    plots: bool = True,
) -> Path:
    """Ingest, answer and score every selected question with every peer; returns the output folder.

    Tests pass `answer_model` (a scripted model) and `make_peer` (a fake peer); the real run starts the
    embedded model (or uses `RECOLLECT_LLM_*`) and builds mem0 / LangMem on it.
    """
    from recollect.eval import report
    from recollect.eval.runner import (
        _check_dataset,
        _check_resumable,
        backbone_name,
        make_run_id,
        resolve_judge,
    )
    from recollect.settings import get_settings

    peer_max_tokens = peer_max_tokens or get_settings().llm_max_tokens  # the cap our own calls have
    peers = list(dict.fromkeys(peers))
    unknown = [p for p in peers if p not in PEERS and make_peer is None]
    if not peers or unknown:
        raise EvalError(f"unknown peer {unknown[0] if unknown else ''!r} (choose from: {', '.join(PEERS)})")
    if top_k < 1:
        raise EvalError(f"--top-k must be >= 1, got {top_k}")
    if answer_model is not None and make_peer is None:
        raise EvalError("an injected answer model needs an injected peer factory (make_peer)")
    plan = plan_run(data_path, None, conversations, categories, limit, 1, include_adversarial, dedupe,
                    max_sessions, sample, seed)
    ctx = ctx or AllMethodsContext()
    backbone_id = backbone_name(replace(ctx, chat_model=answer_model) if answer_model is not None else ctx)
    settings = {p: peer_settings(p, top_k, peer_max_tokens) for p in peers}
    selection = {"dataset_sha256": plan.dataset_sha256, "conversations": sorted(plan.conversations),
                 "categories": list(plan.qset.categories), "limit": limit, "sample": sample, "seed": seed,
                 "max_sessions": max_sessions, "dedupe": dedupe, "include_adversarial": include_adversarial}
    out = Path(out_dir) if out_dir is not None else Path("runs") / make_run_id(
        {"peers": settings, **selection}).replace("eval-", "peers-")
    out.mkdir(parents=True, exist_ok=True)
    _check_dataset(out, plan.dataset_sha256)
    eval_cfg = _eval_config(out)
    judge_obj, judge_model = resolve_judge(
        _judge_choice(judge, eval_cfg, backbone_id) if isinstance(judge, str) else judge,
        replace(ctx, chat_model=answer_model) if answer_model is not None else ctx)
    run_id = (eval_cfg or {}).get("run_id") or make_run_id({"peers": settings, **selection}).replace("eval-", "peers-")
    base_ids = {"run_id": run_id, "backbone_model": backbone_id, "judge_model": judge_model,
                "code_commit": report.code_version()}

    jsonl = out / JSONL_NAME
    rows = load_rows(jsonl, retry_errors=False)  # leave the graphs' rows as they are
    _check_resumable(rows, base_ids, out)
    previous = _peers_config(out)
    old_sha = previous.get("dataset_sha256")
    if old_sha and old_sha != plan.dataset_sha256:
        raise EvalError(f"{out} holds peer results for another data file (sha256 {old_sha[:12]}…); choose another --out")
    all_peers = list(dict.fromkeys([*previous.get("peers", {}), *peers]))
    (out / CONFIG_NAME).write_text(json.dumps(
        {"dataset_sha256": plan.dataset_sha256, "selection": selection,
         "peers": {**previous.get("peers", {}), **settings}}, indent=2, default=str) + "\n", encoding="utf-8")

    done = {(r["method"], r["question_id"]) for r in rows if not (r["method"] in peers and r.get("error"))}
    pending = {p: [q for q in plan.questions if (p, q.id) not in done] for p in peers}
    if any(pending.values()):
        if answer_model is not None:
            assert make_peer is not None  # checked above
            _answer_all(out, plan, pending, answer_model, None, make_peer, base_ids, settings, judge_obj, ctx,
                        top_k, show_progress)
        else:
            with backbone() as (model, ep):
                _answer_all(out, plan, pending, model, ep, make_peer or default_factory(ep, peer_max_tokens),
                            base_ids, settings, judge_obj, ctx, top_k, show_progress)
    write_summary(out, plan, all_peers, base_ids, ctx, plots=plots)
    return out


def _answer_all(out: Path, plan: Plan, pending: dict[str, list[Question]], model: BaseChatModel,
                ep: Endpoint | None, make_peer: PeerFactory, base_ids: dict[str, Any],
                settings: dict[str, dict[str, Any]], judge: Any, ctx: AllMethodsContext, top_k: int,
                show_progress: bool) -> None:
    jsonl = out / JSONL_NAME
    for name, questions in pending.items():
        if not questions:
            continue
        store = out / STATE / name
        meter = UsageMeter()
        peer = make_peer(name, store, meter)
        ids = {**base_ids, "settings_id": settings_id(settings[name])}
        try:
            for sample_id in dict.fromkeys(q.sample_id for q in questions):
                ingest_conversation(peer, meter, plan.conversations[sample_id],
                                    namespace_for(sample_id, plan.max_sessions), store, show_progress)
            provs: dict[str, Provenance] = {}
            with jsonl.open("a", encoding="utf-8") as fh:
                for q in tqdm(questions, desc=f"{name} questions", unit="q", disable=not show_progress):
                    ns = namespace_for(q.sample_id, plan.max_sessions)
                    prov = provs.setdefault(ns, Provenance(store / f"{ns}.provenance.json"))
                    row = answer_row(peer, meter, q, plan, prov, model, ids, top_k=top_k, judge=judge,
                                     structured_method=ctx.structured_method, absolute_dates=ctx.answer_absolute_dates)
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    fh.flush()  # one complete line per finished question: the resume point
                    os.fsync(fh.fileno())
        finally:
            peer.close()


# --------------------------------------------------------------------------------------------- summary


def ingestion_records(out: Path, peers: Sequence[str]) -> list[dict[str, Any]]:
    recs = []
    for name in peers:
        for log in sorted((out / STATE / name).glob("*.sessions.jsonl")):
            recs += _read_jsonl(log)
    return recs


def _construction_log(records: Sequence[dict[str, Any]], namespaces: Iterable[str]) -> dict[str, Any]:
    """The peers' ingestion in the shape of the eval's `ingest.json` (summary: "Memory construction")."""
    wanted = set(namespaces)
    out: dict[str, Any] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        if r["namespace"] in wanted:
            groups.setdefault((r["peer"], r["namespace"]), []).append(r)
    for (peer, ns), recs in groups.items():
        out[f"{peer}:{ns}"] = {"reused": [], "built": [{
            "method": peer, "sessions": len(recs), "llm_calls": sum(r["llm_calls"] for r in recs),
            "cached_calls": 0, "prompt_tokens": sum(r["prompt_tokens"] for r in recs),
            "completion_tokens": sum(r["completion_tokens"] for r in recs), "embedded": recs[-1]["stored_after"],
            "seconds": round(sum(r["seconds"] for r in recs), 3)}]}
    return out


def peers_markdown(records: Sequence[dict[str, Any]], settings: dict[str, Any]) -> list[str]:
    """The peers' own section: configuration, and ingestion per session (it is not in the question cost)."""
    lines = ["## Peers (benchmarks/peers)", "",
             "Rows of `mem0` / `langmem` come from `benchmarks/peers` (see its README): each library ingests "
             "the sessions through its own API and answers from its own search (top k) with the `rag` answer "
             "prompt. Evidence and support recall are null (no source turn is kept); session recall uses the "
             "sessions whose ingestion wrote each shown memory.", "",
             "| peer | library | top k | namespace | sessions | s / session | LLM calls / session | prompt tok / session "
             "| compl. tok / session | memories stored | added / updated / deleted | sessions with errors | replies cut at the cap "
             "| tool calls read from text |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["peer"], r["namespace"]), []).append(r)
    for (peer, ns), recs in groups.items():
        n = len(recs)
        cfg = settings.get(peer, {})
        ev = {e: sum(r["events"].get(e, 0) for r in recs) for e in ("ADD", "UPDATE", "DELETE")}
        lines.append(
            f"| {peer} | {cfg.get('library', '–')} {cfg.get('version') or ''} | {cfg.get('top_k', '–')} | {ns} | {n} "
            f"| {sum(r['seconds'] for r in recs) / n:.1f} | {sum(r['llm_calls'] for r in recs) / n:.2f} "
            f"| {sum(r['prompt_tokens'] for r in recs) / n:.0f} | {sum(r['completion_tokens'] for r in recs) / n:.0f} "
            f"| {recs[-1]['stored_after']} | {ev['ADD']} / {ev['UPDATE']} / {ev['DELETE']} "
            f"| {sum(bool(r['errors']) for r in recs)} | {sum(r.get('replies_cut_at_cap', 0) for r in recs)} "
            f"| {sum(r.get('tool_calls_from_text', 0) for r in recs)} |")
    return [*lines, ""]


def write_summary(out: Path, plan: Plan, peers: Sequence[str], ids: dict[str, Any], ctx: AllMethodsContext,
                  plots: bool = True) -> dict[str, Any]:
    """summary.md/.json with the eval run's methods (if the folder holds one) and the peers, over this selection."""
    from recollect.eval import report

    eval_cfg = _eval_config(out) or {}
    methods = [*[m for m in eval_cfg.get("methods", []) if m not in peers], *peers]
    rows = load_rows(out / JSONL_NAME, retry_errors=False)
    selected = report.select_rows(rows, [(m, q) for m in methods for q in plan.questions])
    ingest_path = out / "ingest.json"
    log = json.loads(ingest_path.read_text(encoding="utf-8")) if ingest_path.is_file() else {}
    records = ingestion_records(out, peers)
    namespaces = {namespace_for(s, plan.max_sessions) for s in plan.conversations}
    log = {**log, **_construction_log(records, namespaces)}
    config = eval_cfg or {"context": {}}
    meta = report.run_metadata(replace(plan, methods=methods), ids, config, 1, ctx, log)
    settings = _peers_config(out).get("peers", {})
    meta["peers"] = settings
    doc = report.write_reports(out, selected, meta, methods, plots=plots)
    with (out / "summary.md").open("a", encoding="utf-8") as fh:
        fh.write("\n".join(peers_markdown([r for r in records if r["namespace"] in namespaces], settings)))
    return doc


# --------------------------------------------------------------------------------------------- command line


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, metavar="FILE", help="LoCoMo-format JSON file")
    ap.add_argument("--peers", nargs="+", default=["mem0,langmem"], help="comma/space separated (default: both)")
    ap.add_argument("--conversations", nargs="+", metavar="ID", help="sample ids (default: all)")
    ap.add_argument("--categories", nargs="+", metavar="C", help="category numbers (default: 1,2,3,4)")
    ap.add_argument("--limit", type=int, help="first N selected questions per conversation")
    ap.add_argument("--sample", type=int, help="a stratified sample of N questions (fixed by --seed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-sessions", type=int, metavar="N", help="only the first N sessions of each conversation")
    ap.add_argument("--include-adversarial", action="store_true")
    ap.add_argument("--no-dedupe", action="store_true")
    ap.add_argument("--judge", default="auto", help="'auto' (the eval run's judge in --out, else none), 'none', "
                                                     "'local' or a model name, as in `recollect eval`")
    ap.add_argument("--out", help="output folder; the folder of a `recollect eval` run puts both in one summary")
    ap.add_argument("--top-k", type=int, default=5, help="memories from the peer's search (default 5, like rag_top_k)")
    ap.add_argument("--peer-max-tokens", type=int,
                    help="completion cap of the peers' own calls (default: RECOLLECT_LLM_MAX_TOKENS, 1024, the "
                         "cap of our own calls; mem0's update reply lists every memory it saw)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cats = [int(c) for c in _split(args.categories) or ["1", "2", "3", "4"]]
        out = run_peers(args.data, _split(args.peers) or list(PEERS), _split(args.conversations), cats, args.limit,
                        include_adversarial=args.include_adversarial, dedupe=not args.no_dedupe,
                        max_sessions=args.max_sessions, sample=args.sample, seed=args.seed, judge=args.judge,
                        out_dir=args.out, top_k=args.top_k, peer_max_tokens=args.peer_max_tokens,
                        show_progress=not args.quiet, plots=not args.no_plots)
    except (EvalError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
