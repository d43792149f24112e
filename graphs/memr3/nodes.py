"""MemR3's two nodes that make no LLM call, `retrieve` and `reflect`, and the retrieval-opportunity
rule that they and the router apply (README.md in this folder, "Nodes")."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from recollect.budget import pack
from recollect.graphs.memr3.layout import router_budget_prompt
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.memr3.state import MemR3State
from recollect.llm.usage import estimate_tokens
from recollect.steps import snippet_source
from recollect.trace import emit


def opportunity(state: MemR3State, ctx: MemR3Context) -> bool:
    """Some chunk with no masked turn remains, and the retrieval-attempt budget is not spent."""
    if state.get("memr3_retrieval_attempts", 0) >= ctx.memr3_retrieval_budget:
        return False
    left = snippet_source(ctx, state["namespace"]).has_unmasked(state.get("masks") or [])
    return left is not False


def retrieve(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
    ctx = runtime.context
    question = state["question"]
    refinement = (state.get("query") or "").strip()
    query_text = f"{question}. {refinement}" if refinement else question
    source = snippet_source(ctx, state["namespace"])
    units = source.retrieve(query_text, state.get("masks") or [], ctx.memr3_top_k)

    # Prompt budget: drop the lowest-ranked chunks first (a smaller one further down may still fit);
    # the best chunk is always shown. Dropped chunks are not masked, so a later retrieval can bring them.
    fixed = estimate_tokens(
        router_budget_prompt(ctx) + question + "\n".join(state.get("evidence") or [])
        + "\n".join(state.get("gaps") or []) + (state.get("memr3_reasoning") or "")
    ) + 150
    packed = pack(units, ctx.max_prompt_tokens, lambda u: estimate_tokens(u.text), used=fixed,
                  keep_first=True, on_overflow="skip")
    kept = packed.kept

    snippets = [{"chunk_id": u.id, "turn_ids": list(u.turn_ids), "text": u.text} for u in kept]
    turn_ids = [t for u in kept for t in u.turn_ids]
    return {
        "memr3_snippets": snippets,
        "memr3_retrievals": [snippets],
        "retrieved": snippets,
        "masks": turn_ids,
        "shown_turn_ids": turn_ids,
        "retrieved_turn_ids": [t for u in units for t in u.turn_ids],  # before the prompt budget
        "memr3_queries": [refinement] if refinement else [],
        "query": None,
        "memr3_retrieval_attempts": state.get("memr3_retrieval_attempts", 0) + 1,
        "memr3_reflect_streak": 0,
        "memr3_forced": None if kept else "reflect",
        "trace": emit(
            "retrieve",
            query_text=query_text,
            chunk_ids=[u.id for u in kept],
            turn_ids=turn_ids,
            dropped_for_budget=[u.id for u in packed.dropped],
            forced_next="reflect" if not kept else None,
            shown_turn_ids=turn_ids,
        ),
    }


def reflect(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
    ctx = runtime.context
    forced = bool(state.get("memr3_decision_forced"))
    streak_hit = state.get("memr3_reflect_streak", 0) >= ctx.memr3_max_reflect_streak
    can_retrieve = opportunity(state, ctx)
    nxt = "retrieve" if (forced or streak_hit) and can_retrieve else None
    return {
        "memr3_forced": nxt,
        "trace": emit(
            "reflect", reasoning=state.get("memr3_reasoning"), forced=forced, streak_hit=streak_hit,
            opportunity=can_retrieve, forced_next=nxt,
        ),
    }
