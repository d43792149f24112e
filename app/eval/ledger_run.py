"""`recollect eval --rows DIR`: reuse every current committed row, carry stale ones over, compute the rest.

For each (graph, question) of the selection, in plan order:

- **current**: DIR holds a row with the graph's fingerprint and the question's digest: reused as it is;
- **carry**: DIR holds a row of an older fingerprint (or `--import-rows` a text row of an earlier run) and
  the tape store has replies: the question is replayed with no model; zero misses and the same answer
  digest keep the old row (its measured numbers) under the new fingerprint, with the evidence;
- **compute**: asked with the model (requests recorded on the tape), written to DIR and to the run folder.

Each graph reads memory built into its own data directory in the cache, keyed by its builder's
fingerprint, so a kept machine skips the build. With a time budget, no build or question starts that its
estimate says would not finish in time; the summary is then marked partial and a re-run continues.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recollect.eval import estimate
from recollect.eval.fingerprint import (
    builder_fingerprint,
    graph_fingerprint,
    memory_dir,
    memory_name,
    model_identity,
)
from recollect.eval.ledger import (
    append_ledger,
    carried,
    digest,
    ledger_row,
    read_ledger,
    runtime_provenance,
)
from recollect.eval.plan import Plan, namespace_for
from recollect.eval.questions import Question
from recollect.eval.tape import TapeStore, install, tape_folder, tape_mode


@dataclass
class GraphPlan:
    """One graph's share of the run: its fingerprints, memory and rows by status."""

    method: str
    fingerprint: str
    builder: str
    builder_fingerprint: str
    memory: Path
    # the fingerprints of current rows (`Fingerprint.accepted`); the graph's own fingerprint is always one
    accepted: frozenset[str] = frozenset()
    current: list[str] = field(default_factory=list)  # question ids
    carry: list[str] = field(default_factory=list)
    compute: list[str] = field(default_factory=list)
    builds_needed: list[str] = field(default_factory=list)  # sample ids whose memory must be built
    seconds_per_question: float = 0.0
    build_seconds: float = 0.0
    carried: int = 0  # done in this run
    computed: int = 0
    carry_failed: int = 0

    def __post_init__(self) -> None:
        self.accepted = self.accepted | {self.fingerprint}

    def estimate_seconds(self) -> float:
        """Model time if every carry-over replays from the tape."""
        return (self.build_seconds + len(self.compute) * self.seconds_per_question
                + len(self.carry) * estimate.REPLAY_SECONDS)

    def estimate_seconds_at_most(self) -> float:
        """Model time if no carry-over replays (its graph's calls changed, so its questions are computed)."""
        return self.build_seconds + (len(self.compute) + len(self.carry)) * self.seconds_per_question


def asked_digest(q: Question) -> str:
    from recollect.eval.rows import _asked_text

    return digest(_asked_text(q)[0]) or ""


def _built(mem: Path, namespace: str, sessions: int, builder: str) -> bool:
    from recollect.memory.workspace import open_workspace

    if not (mem / "store.sqlite").exists() and not (mem / "recollect.db").exists():
        return False
    info = open_workspace(str(mem)).namespace_info(namespace)
    if info is None or len(info.sessions) < sessions:
        return False
    return builder == "turns" or builder in info.built


def plan_graphs(plan: Plan, ctx: Any, rows_dir: Path, stale_rows: Sequence[dict[str, Any]],
                tape_entries: int) -> list[GraphPlan]:
    """Every graph's fingerprints, memory directory and the status of each of its questions."""
    ledger = read_ledger(rows_dir, plan.methods)
    builds = estimate.read_builds(rows_dir)
    out = []
    for method in plan.methods:
        gfp = graph_fingerprint(method, ctx)
        builder = memory_name(method)
        bfp = builder_fingerprint(builder, ctx)
        g = GraphPlan(method, gfp.digest, builder, bfp.digest, memory_dir(builder, bfp), accepted=gfp.accepted)
        mine = [r for r in ledger if r["method"] == method]
        older = [r for r in [*mine, *stale_rows] if r["method"] == method and r["fingerprint"] not in g.accepted
                 and not r.get("error")]
        for q in plan.questions:
            want = asked_digest(q)
            # a row whose graph raised is asked again, as a resumed run of text rows does
            if any(r["question_id"] == q.id and r["fingerprint"] in g.accepted and r["question_digest"] == want
                   and not r.get("error") for r in mine):
                g.current.append(q.id)
            elif tape_entries and any(r["question_id"] == q.id and r["question_digest"] == want for r in older):
                g.carry.append(q.id)
            else:
                g.compute.append(q.id)
        pending = set(g.carry) | set(g.compute)
        for sample_id, conv in plan.conversations.items():
            if any(q.sample_id == sample_id and q.id in pending for q in plan.questions) and not _built(
                    g.memory, namespace_for(sample_id, plan.max_sessions), len(conv.sessions), builder):
                g.builds_needed.append(sample_id)
        g.seconds_per_question = estimate.seconds_per_question(method, ledger)
        per_session = estimate.build_seconds_per_session(builder, builds)
        g.build_seconds = sum(per_session * len(plan.conversations[s].sessions) for s in g.builds_needed)
        out.append(g)
    # Graphs sharing a builder build its memory once: the later ones only wait for the first.
    seen: set[tuple[str, str]] = set()
    for g in out:
        for s in list(g.builds_needed):
            if (g.builder_fingerprint, s) in seen:
                g.build_seconds -= estimate.build_seconds_per_session(g.builder, builds) * len(
                    plan.conversations[s].sessions)
            seen.add((g.builder_fingerprint, s))
        g.build_seconds = max(g.build_seconds, 0.0)
    return out


def adopt_legacy_rows(graphs: Sequence[GraphPlan], rows_dir: Path) -> int:
    """Each current row of a graph's legacy digest (the same module bytes, so the same code) copied under its
    code digest: a later comment or layout edit changes the legacy digest only, and the copy stays current.
    Returns how many rows were copied."""
    ledger = read_ledger(rows_dir, [g.method for g in graphs])
    copied = 0
    for g in graphs:
        legacy = g.accepted - {g.fingerprint}
        have = {r["question_id"] for r in ledger if r["method"] == g.method and r["fingerprint"] == g.fingerprint}
        for r in ledger:
            if r["method"] != g.method or r["fingerprint"] not in legacy or r["question_id"] in have:
                continue
            append_ledger(rows_dir, carried(r, g.fingerprint, {"same_source": True,
                                                               "date": dt.date.today().isoformat()}))
            have.add(r["question_id"])
            copied += 1
    return copied


def plan_text(graphs: Sequence[GraphPlan], questions: int) -> str:
    """What `--plan` prints: per graph, rows current / to carry over / to compute, and model time."""
    lines = [f"{questions} questions per graph",
             f"{'graph':14s} {'fingerprint':17s} {'current':>7s} {'carry':>6s} {'compute':>7s} "
             f"{'builds':>6s}  estimated model time"]
    total = most = 0.0

    def span(low: float, high: float) -> str:
        # a carry-over replays only where the tape holds every request its graph now makes
        return estimate.format_minutes(low) + (f" to {estimate.format_minutes(high)}" if high > low + 30 else "")

    for g in graphs:
        sec, at_most = g.estimate_seconds(), g.estimate_seconds_at_most()
        total, most = total + sec, most + at_most
        lines.append(f"{g.method:14s} {g.fingerprint[:16]:17s} {len(g.current):7d} {len(g.carry):6d} "
                     f"{len(g.compute):7d} {len(g.builds_needed):6d}  {span(sec, at_most)}"
                     + (f" (memory {estimate.format_minutes(g.build_seconds)}, "
                        f"{g.seconds_per_question:.0f} s per question)"
                        if g.compute or g.carry or g.builds_needed else ""))
    lines.append(f"{'total':14s} {'':17s} {sum(len(g.current) for g in graphs):7d} "
                 f"{sum(len(g.carry) for g in graphs):6d} {sum(len(g.compute) for g in graphs):7d} "
                 f"{sum(len(g.builds_needed) for g in graphs):6d}  {span(total, most)}")
    if any(g.carry for g in graphs):
        lines.append("(a range: the low end if every carry-over replays from the tape, the high end if none does)")
    return "\n".join(lines)


def open_tapes(ctx: Any, imports: Sequence[Path] = ()) -> TapeStore:
    """The tape store of the run's model, with any tape files given (`--tape`) added; installed into
    every chat model the process builds from now on."""
    from recollect.settings import get_settings

    store = TapeStore(tape_folder(get_settings().cache_dir, model_identity(ctx)))
    for path in imports:
        store.load(Path(path))
    install(store)
    return store


class Deadline:
    """The time budget: whether work estimated to take `seconds` still fits."""

    def __init__(self, budget_s: float | None) -> None:
        self.end = None if budget_s is None else time.monotonic() + budget_s
        self.stopped = False

    def fits(self, seconds: float) -> bool:
        """Whether `seconds` of work still fit; each answer is its own (a question too long to compute now
        does not stop a later carry-over, which takes seconds), and `stopped` records that one did not."""
        ok = self.end is None or time.monotonic() + seconds <= self.end
        self.stopped = self.stopped or not ok
        return ok


def _build(g: GraphPlan, plan: Plan, ctx: Any, rows_dir: Path, store: TapeStore, deadline: Deadline,
           show_progress: bool, builds: list[dict[str, Any]]) -> bool:
    """Build what this graph's memory lacks; False when the budget stopped it."""
    from recollect.ingestion import ingest_conversation

    per_session = estimate.build_seconds_per_session(g.builder, builds)
    mctx = ctx.with_overrides(data_dir=str(g.memory))
    for sample_id in g.builds_needed:
        conv = plan.conversations[sample_id]
        ns = namespace_for(sample_id, plan.max_sessions)
        if _built(g.memory, ns, len(conv.sessions), g.builder):
            continue  # another graph with the same builder built it in this run
        if not deadline.fits(per_session * len(conv.sessions)):
            return False
        g.memory.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        store.default_mode = "prefer"  # a builder's worker threads see the default, not the context
        try:
            with tape_mode("prefer") as stats:
                ingest_conversation(conv, ns, mctx, methods=[] if g.builder == "turns" else [g.builder],
                                    show_progress=show_progress)
        finally:
            store.default_mode = "record"
        entry = {"builder": g.builder, "fingerprint": g.builder_fingerprint, "sample_id": sample_id,
                 "sessions": len(conv.sessions), "seconds": round(time.monotonic() - start, 1),
                 "recorded_requests": stats.recorded, "replayed_requests": stats.hits,
                 "provenance": runtime_provenance(), "date": dt.date.today().isoformat()}
        builds.append(entry)
        _append_build(rows_dir, entry)
    return True


def _append_build(rows_dir: Path, entry: dict[str, Any]) -> None:
    import json

    rows_dir.mkdir(parents=True, exist_ok=True)
    with (rows_dir / estimate.BUILDS_NAME).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def run_graphs(graphs: Sequence[GraphPlan], plan: Plan, ctx: Any, rows_dir: Path, stale_rows: Sequence[dict[str, Any]],
               store: TapeStore, deadline: Deadline, ask: Callable[[str, Question, Any], dict[str, Any]],
               on_text_row: Callable[[dict[str, Any]], None], show_progress: bool,
               tick: Callable[[str], object] = lambda m: None, reuse_replies: bool = False) -> None:
    """Carry over and compute every pending row, graph by graph, within the deadline.

    `reuse_replies`: a computed question's requests already on the tape are answered from it and only the
    new ones reach the model (a change that adds or alters a graph's later calls then costs only those). The
    same request gets the same reply, which is what a carry-over rests on too. The row's seconds add the
    taped replies' server time (prefill and decode) to the measured wall time, and its provenance counts
    them (`tape_served_requests`)."""
    builds = estimate.read_builds(rows_dir)
    by_id = {q.id: q for q in plan.questions}
    older = read_ledger(rows_dir, plan.methods)
    for g in graphs:
        if not (g.carry or g.compute):
            continue
        if not _build(g, plan, ctx, rows_dir, store, deadline, show_progress, builds):
            return
        mctx = ctx.with_overrides(data_dir=str(g.memory))
        candidates = [r for r in [*older, *stale_rows] if r["method"] == g.method
                      and r["fingerprint"] not in g.accepted and not r.get("error")]
        for qid in [q.id for q in plan.questions if q.id in set(g.carry) | set(g.compute)]:
            q = by_id[qid]
            olds = [r for r in reversed(candidates) if r["question_id"] == qid and r["question_digest"] == asked_digest(q)]
            if qid in g.carry and olds and deadline.fits(estimate.REPLAY_SECONDS):
                with tape_mode("replay") as stats:
                    row = ask(g.method, q, mctx)
                replayed = stats.misses == 0 and not row.get("error")
                # The stale row this replay reproduces, newest first: a graph may hold rows of several older
                # fingerprints for one question (settings tried and dropped), and only the one made by these
                # requests may be carried, so its answer and its counts must be the replay's.
                old = next((r for r in olds if replayed and (stats.hits or not r.get("n_llm_calls"))
                            and same_answer_and_counts(row, r)), None)
                if old is not None:
                    append_ledger(rows_dir, carried(old, g.fingerprint, {
                        **stats.evidence(), "code_commit": row.get("code_commit"),
                        "date": dt.date.today().isoformat()}))
                    g.carried += 1
                    tick(g.method)
                    continue
                g.carry_failed += 1
            if not deadline.fits(g.seconds_per_question):
                continue  # no time to compute this one; a later question may still be carried (seconds each)
            with tape_mode("prefer" if reuse_replies else "record") as stats:
                row = ask(g.method, q, mctx)
            provenance = runtime_provenance()
            if stats.hits:
                row["wall_time_s"] = round(float(row.get("wall_time_s") or 0.0) + store.served_seconds(stats.keys), 3)
                provenance = {**provenance, "tape_served_requests": stats.hits}
            on_text_row(row)
            append_ledger(rows_dir, ledger_row(row, _asked(q), g.fingerprint, provenance))
            g.computed += 1
            tick(g.method)


# What a replay from the tape reproduces exactly (the replies carry the server's usage), besides the answer.
REPLAYED_COUNTS = ("n_llm_calls", "prompt_tokens", "completion_tokens")


def same_answer_and_counts(row: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether a replayed text row gives a stale ledger row's answer and model counts (the same requests
    replayed give the same replies; a row of other requests differs in its counts or answer)."""
    if digest(row.get("prediction") or "") != old["answer_digest"]:
        return False
    return all(row.get(k) == old.get(k) for k in REPLAYED_COUNTS if k in old and k in row)


def _asked(q: Question) -> str:
    from recollect.eval.rows import _asked_text

    return _asked_text(q)[0]


def import_text_rows(path: Path, plan: Plan) -> list[dict[str, Any]]:
    """An earlier run's text rows (`per_question.jsonl`) as carry-over candidates: ledger rows under the
    pseudo-fingerprint `run:<commit>`, made on this machine's runtime (an import is done where it ran)."""
    from recollect.eval.rows import load_rows

    by_id = {q.id: q for q in plan.questions}
    out = []
    for row in load_rows(Path(path), retry_errors=False):
        q = by_id.get(row.get("question_id", ""))
        if q is None or row.get("question") != q.question or row.get("error"):
            continue
        out.append(ledger_row(row, _asked(q), f"run:{row.get('code_commit') or 'unknown'}", runtime_provenance()))
    return out


def ledger_metadata(graphs: Sequence[GraphPlan], selected: Sequence[dict[str, Any]], questions: int, partial: bool,
                    rows_dir: Path) -> dict[str, Any]:
    """What the summary says of its rows: per graph, the fingerprint, how many rows were reused, carried
    over and computed in this run, how many are still missing, and which runtime builds made them."""
    from recollect.eval.ledger import provenance_label

    per_graph: dict[str, Any] = {}
    for g in graphs:
        mine = [r for r in selected if r["method"] == g.method]
        builds: dict[str, int] = {}
        for r in mine:
            label = provenance_label(r.get("provenance"))
            builds[label] = builds.get(label, 0) + 1
        per_graph[g.method] = {
            "fingerprint": g.fingerprint, "memory_fingerprint": g.builder_fingerprint,
            "rows": len(mine), "reused": len(g.current), "carried_over_now": g.carried,
            "computed_now": g.computed, "carry_failed": g.carry_failed, "missing": questions - len(mine),
            "carried_rows": sum(bool(r.get("carried_over")) for r in mine), "provenance": builds,
        }
    return {"rows_dir": str(rows_dir), "partial": partial or any(v["missing"] for v in per_graph.values()),
            "graphs": per_graph}
