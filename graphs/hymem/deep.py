"""HyMem's deep module: the model selects Level-1 summaries from the top `hymem_deep_n` (one call
per batch, batches concurrent), then one call answers from the Level-2 sessions they link to
(README.md in this folder, "Nodes")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.runtime import Runtime

from recollect.budget import pack
from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.graphs.hymem.common import (
    EMPTY_STORE,
    answer_style,
    numbered,
    pool_line,
    round_of,
    top_summaries,
    turns_of,
)
from recollect.graphs.hymem.layout import budget_prompt
from recollect.graphs.hymem.memory import load_sessions
from recollect.graphs.hymem.replies import MAX_TOKENS, DeepReply, SelectReply, call, call_kept
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.state import HyMemState
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.memory.vectors import Unit
from recollect.steps import NO_INFO, clean_answer, is_no_info, workspace
from recollect.trace import emit


def select_batch(ctx: HyMemContext, query: str,
                 batch: list[Unit]) -> tuple[list[int], dict[str, Any], dict[str, Any]]:
    """One selection call for the current query q_i; returns (valid indices, usage, note for the trace)."""
    lines = "\n".join(numbered(i, u) for i, u in enumerate(batch))
    res = call(ctx, "deep_select", SelectReply, "deep_select", question=query, lines=lines)
    raw = res.value.selected if res.value else []
    picked = list(dict.fromkeys(i for i in raw if 0 <= i < len(batch)))
    note: dict[str, Any] = {"size": len(batch), "model_selected": raw}
    if not picked:
        picked = list(range(min(ctx.hymem_deep_fallback_k, len(batch))))
        note["fallback"] = ("invalid selection" if res.value is None
                            else "empty selection after dropping bad indices")
        note["fallback_top"] = len(picked)
        if res.value is None:
            note.update(res.failure_note())
    elif len(picked) != len(raw):
        note["dropped"] = [i for i in raw if i not in picked or raw.count(i) > 1]
    return picked, res.usage, note


def session_lines(doc: dict[str, Any], budget: int) -> tuple[list[str], list[str]]:
    """A session's lines (header + turns) and turn ids, cut at `budget` tokens if needed; the header and
    the first turn are always kept, so a cut session still says something."""
    lines = doc["text"].split("\n")
    header, turn_lines = lines[0], lines[1:]
    ids = list(doc.get("turn_ids") or [])
    turns = pack(turn_lines, budget, estimate_tokens, used=estimate_tokens(header), keep_first=True)
    return [header, *turns.kept], ids[: len(turns.kept)]


@dataclass
class ShownSessions:
    """What the deep answer prompt shows: session lines and ids, and what the budget left out."""

    lines: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    turn_ids: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)

    def show(self, sid: str, lines: list[str], turn_ids: list[str]) -> None:
        self.lines.extend(lines)
        self.sessions.append(sid)
        self.turn_ids.extend(turn_ids)


def fit_sessions(sessions: dict[str, dict[str, Any]], chosen: list[str], max_sessions: int,
                 budget: int) -> ShownSessions:
    """Whole sessions in selection order, at most `max_sessions`, within `budget` tokens.

    The first session is always shown (cut to the budget if it alone overflows), so the answer call
    never goes out without memory; a later session that does not fit whole is left out and the next
    one tried.
    """
    cap = max(1, max_sessions)
    out = ShownSessions()
    first_sid, *rest = chosen[:cap]
    first = sessions[first_sid]
    if estimate_tokens(first["text"]) > budget:
        lines, ids = session_lines(first, budget)
        out.truncated.append(first_sid)
    else:
        lines, ids = first["text"].split("\n"), first["turn_ids"]
    out.show(first_sid, lines, ids)
    # A cut session costs what is left of it, so the rest are measured against that.
    others = pack(rest, budget, lambda sid: estimate_tokens(sessions[sid]["text"]),
                  used=estimate_tokens("\n".join(lines)), on_overflow="skip")
    for sid in others.kept:
        out.show(sid, sessions[sid]["text"].split("\n"), sessions[sid]["turn_ids"])
    out.dropped = others.dropped + chosen[cap:]
    return out


def deep(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    ns = state["namespace"]
    question = state["question"]
    query = state.get("query") or question
    rnd = round_of(state)
    draft = state.get("draft_answer") or ""
    candidates = top_summaries(ctx, ns, query, ctx.hymem_deep_n)
    if not candidates:
        return {"hymem_deep_candidates": [], "hymem_selected_ids": [],
                "trace": emit("deep", round=rnd, query=query, calls=0, why=EMPTY_STORE + "; draft kept")}

    size = max(1, ctx.hymem_deep_batch)
    batches = [candidates[i : i + size] for i in range(0, len(candidates), size)]
    if ctx.hymem_parallel_batches and len(batches) > 1:
        # HyMemContext-copying pool: LangChain callbacks and the run config follow into the threads.
        with ContextThreadPoolExecutor(max_workers=min(len(batches), 8)) as pool:
            results = list(pool.map(lambda b: select_batch(ctx, query, b), batches))
    else:
        results = [select_batch(ctx, query, b) for b in batches]
    usage: dict[str, Any] = {}
    selected: list[Unit] = []
    notes = []
    for batch, (picked, u, batch_note) in zip(batches, results, strict=True):
        usage = merge_usage(usage, u)
        selected.extend(batch[i] for i in picked)
        notes.append(batch_note)
    selected = list({u.id: u for u in selected}.values())

    sessions = load_sessions(workspace(ctx), ns)
    masks = set(state.get("masks") or [])

    def fresh(units: list[Unit]) -> list[str]:
        out: list[str] = []
        for u in units:
            sid = u.metadata.get("session")
            if not sid or sid in out:
                continue
            doc = sessions.get(sid)
            if doc is None:
                continue
            if set(doc.get("turn_ids") or []) <= masks:
                continue  # every turn was shown in an earlier round; its content lives in the pool
            out.append(sid)
        return out

    chosen = fresh(selected)
    session_source = "selected"
    if not chosen:
        chosen, session_source = fresh(candidates), "highest-ranked unmasked candidates"
    skipped_masked = [u.metadata.get("session") for u in selected
                      if u.metadata.get("session") in sessions
                      and set(sessions[u.metadata["session"]].get("turn_ids") or []) <= masks]
    base = {
        "hymem_deep_candidates": [u.id for u in candidates],
        "hymem_selected_ids": [u.id for u in selected],
        "usage": usage,
    }
    if not chosen:
        return {**base, "trace": emit(
            "deep", round=rnd, query=query, candidates=len(candidates), batches=notes,
            selected_ids=[u.id for u in selected],
            skipped_masked_sessions=list(dict.fromkeys(skipped_masked)), calls=len(batches),
            why="every candidate session was already shown; deep answer skipped, draft kept",
        )}

    # Session cap, then the prompt budget (whole sessions in selection order; the first may be cut).
    pool_lines = pool_line(draft)
    budget = ctx.max_prompt_tokens - estimate_tokens(budget_prompt(ctx, "deep_answer") + question
                                                     + "".join(pool_lines)) - MAX_TOKENS
    shown = fit_sessions(sessions, chosen, ctx.hymem_deep_max_sessions, budget)
    shown_turns = shown.turn_ids
    context = shown.lines + pool_lines

    res, sent = call_kept(ctx, "deep_answer", DeepReply, "deep_answer", question=question,
                          context="\n".join(context), style=answer_style(ctx, "deep"))
    usage = merge_usage(usage, res.usage)
    reply = res.value
    shown_set = set(shown_turns)
    matcher = TurnIdMatcher(shown_turns)
    # The model's answer: the validated reply, else its raw text unless that is empty or only JSON.
    written = reply.answer if reply is not None else clean_answer(res.raw)
    pool_answer = clean_answer(draft)
    note: dict[str, Any] = {} if reply is not None else res.failure_note()
    if not is_no_info(written):
        text, note["answer_from"] = written, "deep answer" if reply is not None else "raw reply"
    elif pool_answer and not is_no_info(pool_answer):
        text, note["answer_from"] = pool_answer, "memory pool (the deep reply had no answer)"
    else:
        text, note["answer_from"] = NO_INFO, "no info"
    cited = matcher.resolve(reply.supports) if reply is not None else []
    cited = cited or (matcher.find(written) if text == written else [])
    linked = ([t for t in turns_of(selected) if t in shown_set]
              or [t for t in turns_of(candidates) if t in shown_set])
    supports = cited or linked
    kept_pool = text == pool_answer and text != written
    update: dict[str, Any] = {
        **base,
        "usage": usage,
        "hymem_sessions_shown": shown.sessions,
        "masks": shown_turns,
        "shown_turn_ids": shown_turns,
        # the chosen sessions' turns, before the session cap and the prompt budget
        "retrieved_turn_ids": [t for sid in chosen for t in sessions[sid].get("turn_ids") or []],
        "evidence": context,
        "hymem_exchange": sent,
    }
    if not kept_pool:  # a kept earlier answer keeps its own status and supports
        update.update(draft_answer=text, hymem_status="deep", supports=supports)
    return {
        **update,
        "trace": emit(
            "deep", round=rnd, query=query, question=question, candidates=len(candidates),
            batches=notes, selected_ids=[u.id for u in selected], session_source=session_source,
            skipped_masked_sessions=list(dict.fromkeys(skipped_masked)), sessions_shown=shown.sessions,
            sessions_dropped=shown.dropped, sessions_truncated=shown.truncated, answer=text,
            supports=None if kept_pool else supports,
            supports_from=(None if kept_pool
                           else "cited by the answer" if cited else "linked from summaries"),
            shown_turn_ids=shown_turns, **note,
        ),
    }
