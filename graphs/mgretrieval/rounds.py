"""One retrieval round: the `retrieve_round` node (README.md in this folder, "The retrieval pyramid").

A round takes the next pyramid group that still has memories the model has not seen (R̃ = s(P)
minus every turn shown, eq. 11), caps them by relevance to the question (`mg_turn_ranking`), tops a
narrow group up with the nearest turns (`mg_dense_fill`), and cuts the least relevant ones until the
assess prompt fits
`max_prompt_tokens`. With no group left it can run a dense round instead (`mg_empty_fallback`,
`mg_exhausted_fallback`). Deterministic: no LLM call.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from recollect.answer_rewrite import memory_line, memory_lines
from recollect.budget import pack
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.state import MGRetrievalState, RoundEntry
from recollect.graphs.mgretrieval.turns import dense_turns, memory_item, session_dates, turn_order
from recollect.graphs.mgretrieval.vocabulary import METHOD
from recollect.llm.usage import estimate_tokens
from recollect.memory.turn_ranking import relevance, top_by_similarity
from recollect.prompts import load_prompt
from recollect.steps import workspace
from recollect.trace import emit


def _memory_tokens(mem: dict[str, Any]) -> int:
    """A new memory's cost in the assess prompt: its memory line."""
    return estimate_tokens(memory_line(mem))


def _assess_fixed_tokens(state: MGRetrievalState) -> int:
    """Tokens of an assess prompt before its new memories (template, question, a, H)."""
    critical = state.get("critical_memories") or []
    return estimate_tokens(load_prompt(METHOD, "assess") + state["question"]
                           + (state.get("draft_answer") or "") + memory_lines(critical)) + 150


def retrieve_round(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    question = state["question"]
    pyramid = state.get("mg_pyramid") or []
    masks = set(state.get("masks") or [])
    iteration = state.get("iteration", 0)
    rnd = iteration + 1
    cursor = state.get("mg_cursor", 0)

    if iteration >= max(0, ctx.mg_max_rounds):
        return {"mg_exhausted": True, "mg_new_memories": [],
                "trace": emit("retrieve_round", round=rnd, exhausted=True, note="round budget spent")}

    skipped: list[str] = []
    group: dict[str, Any] | None = None
    fresh: list[str] = []
    while cursor < len(pyramid):
        cand = pyramid[cursor]
        cursor += 1
        fresh = [t for t in cand["ids"] if t not in masks]  # eq. 11: R̃ = s(P) minus everything shown
        if fresh:
            group = cand
            break
        skipped.append(" + ".join(cand["keywords"]))  # fully shown: skipped without a round

    note = None
    cap = max(1, ctx.mg_max_new_per_round)
    if group is None:
        # Round 1 with no group: the spec's dense pseudo-group (mg_empty_fallback). A later round whose
        # pyramid ran out before the round budget: the same dense round over the turns not shown yet
        # (mg_exhausted_fallback, our addition; "stop" = the spec).
        dense = ctx.mg_empty_fallback == "dense" if iteration == 0 else ctx.mg_exhausted_fallback == "dense"
        if dense:
            fresh = dense_turns(ws, ns, question, masks, cap, ctx.mg_turn_ranking)
            if fresh:
                group = {"level": 0, "keywords": [], "size": len(fresh), "ids": fresh}
                if iteration == 0:
                    cause = ("no keyword selected" if not state.get("mg_keywords")
                             else "no keyword group has any memory")
                    note = f"{cause}: dense fallback over the top {len(fresh)} turns"
                else:
                    note = f"pyramid exhausted: dense round over the next {len(fresh)} nearest turns"
        if group is None:
            why = "pyramid exhausted" if pyramid else "no keyword group and no fallback"
            return {
                "mg_exhausted": True, "mg_new_memories": [], "mg_group": None, "mg_cursor": cursor,
                "trace": emit("retrieve_round", round=rnd, exhausted=True, skipped_fully_shown=skipped,
                              note=why),
            }

    # Cap: the turns most relevant to the question (mg_turn_ranking); the overflow is neither shown nor
    # masked.
    order = turn_order(ws, ns)
    fresh.sort(key=lambda t: order.get(t, 1 << 30))
    kept = top_by_similarity(ws, ns, question, fresh, cap, ctx.mg_turn_ranking)
    n_capped = len(fresh) - len(kept)
    # Dense fill (mg_dense_fill, our addition; 0 = the spec): a keyword group with only a few new
    # memories is topped up with the question's nearest unmasked turns, within the per-round cap, so a
    # narrow group never leaves the model a handful of turns. They are shown and masked like the rest.
    fill_to = min(max(0, ctx.mg_dense_fill), cap) if group["level"] > 0 else 0
    filled = (dense_turns(ws, ns, question, masks | set(fresh), fill_to - len(kept), ctx.mg_turn_ranking)
              if len(kept) < fill_to else [])
    kept += filled

    turns = ws.turns(ns)
    dates = session_dates(ws, ns)
    kept.sort(key=lambda t: order.get(t, 1 << 30))  # shown in conversation (session date, turn) order
    new_mems = [memory_item(turns[t], dates.get(t, "")) for t in kept if t in turns]

    # Prompt budget: drop the least similar of the kept memories until the assess prompt fits, never
    # the last one. Dropping the least similar first until the rest fits keeps the longest
    # most-similar-first prefix that fits, which is what `pack` keeps (stop at the first overflow; the
    # most similar always stays). The order is the exact reverse of the drop order, ties included.
    budget = ctx.max_prompt_tokens - _assess_fixed_tokens(state)
    n_budget_cut = 0
    if sum(_memory_tokens(m) for m in new_mems) > budget and len(new_mems) > 1:
        sims = relevance(ws, ns, question, [m["id"] for m in new_mems], ctx.mg_turn_ranking)
        drop_order = sorted(new_mems, key=lambda m: (sims.get(m["id"], 0.0), -order.get(m["id"], 0)))
        fits = pack(reversed(drop_order), budget, _memory_tokens, keep_first=True, on_overflow="stop")
        n_budget_cut = len(fits.dropped)
        kept_ids = {m["id"] for m in fits.kept}
        new_mems = [m for m in new_mems if m["id"] in kept_ids]  # still in conversation order
    shown = [m["id"] for m in new_mems]
    filled_shown = [t for t in shown if t in filled]
    speaker_only = bool(group.get("speaker_only"))
    return {
        "mg_group": group,
        "mg_new_memories": new_mems,
        "mg_cursor": cursor,
        "mg_exhausted": False,
        "masks": shown,
        "retrieved": new_mems,
        # the group's unshown turns and the dense fill, before the per-round cap and the prompt budget
        "retrieved_turn_ids": list(dict.fromkeys([*fresh, *filled])),
        "mg_round_log": [RoundEntry(node="retrieve_round", round=rnd, speaker_only=speaker_only,
                                     cap_truncated=n_capped > 0, n_filled=len(filled_shown))],
        "trace": emit(
            "retrieve_round", round=rnd, level=group["level"], keywords=group["keywords"], size=group["size"],
            n_new=len(shown), n_capped=n_capped, n_budget_cut=n_budget_cut, new_ids=shown,
            n_filled=len(filled_shown), filled_ids=filled_shown, skipped_fully_shown=skipped, note=note,
            # A speaker-only group (Φ ≈ half the conversation) or a capped one degrades the round to
            # dense top-k retrieval over its members; counted per question in the eval summary.
            speaker_only=speaker_only, cap_truncated=n_capped > 0,
        ),
    }
