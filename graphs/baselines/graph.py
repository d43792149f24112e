"""Baselines with the same state, trace and supports as the methods, so runs compare directly.

- `rag`: one retrieval of the top-k MemR3 chunks for the question, then one answer call.
- `full_context`: every turn of the namespace (newest kept first when the prompt budget is too
  small, and the trace says how many were left out), then one answer call.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from recollect.budget import pack
from recollect.graphs.baselines.settings import BaselineContext
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured
from recollect.llm.usage import estimate_tokens
from recollect.prompts import load_prompt, render_prompt
from recollect.state import InputState, MemoryState, OutputState
from recollect.steps import (
    NO_INFO,
    AnswerReply,
    critical_from_turns,
    grounded_supports,
    messages,
    snippet_source,
    wire_question_lifecycle,
    workspace,
)
from recollect.trace import emit


def _answer_from(state: MemoryState, ctx: BaselineContext, lines: list[str], shown: list[str],
                 node: str) -> dict[str, Any]:
    memories = "\n".join(lines) or "(none)"
    user = render_prompt("baselines", "answer", memories=memories, question=state["question"])
    res = call_structured(get_chat_model(ctx), messages(None, user), AnswerReply, node=node,
                          method=ctx.structured_method, max_tokens=120)
    reply = res.value
    text = (reply.answer.strip() if reply else "") or (res.raw.strip() if not reply else "") or NO_INFO
    shown_set = set(shown)
    supports = [i for i in (reply.supports if reply else []) if i in shown_set]
    grounded = not supports
    if grounded:  # no usable citation: shown turns that contain the answer (see grounded_supports)
        supports = grounded_supports(ctx, state["namespace"], text, shown)
    return {
        "answer": text,
        "supports": supports,
        "critical_memories": critical_from_turns(ctx, state["namespace"], supports),
        "usage": res.usage,
        "trace": emit(f"{node}_answer", answer=text, supports=supports,
                      supports_from="answer text found in shown turns" if grounded and supports else None,
                      **(res.failure_note() if not reply else {})),
    }


def rag_retrieve(state: MemoryState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    ctx = runtime.context
    units = snippet_source(ctx, state["namespace"]).retrieve(state["question"], [], ctx.rag_top_k)
    snippets = [{"chunk_id": u.id, "turn_ids": list(u.turn_ids), "text": u.text} for u in units]
    turn_ids = [t for u in units for t in u.turn_ids]
    return {
        "retrieved": snippets,
        "masks": turn_ids,
        "shown_turn_ids": turn_ids,
        "retrieved_turn_ids": turn_ids,
        "query": state["question"],
        "trace": emit("retrieve", query_text=state["question"], chunk_ids=[u.id for u in units],
                      turn_ids=turn_ids, shown_turn_ids=turn_ids),
    }


def rag_answer(state: MemoryState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    snippets = state.get("retrieved") or []
    lines = [s["text"] for s in snippets]
    return _answer_from(state, runtime.context, lines, state.get("masks") or [], "rag")


def full_context_answer(state: MemoryState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ws.require_namespace(state["namespace"])
    turns = list(ws.turns(state["namespace"]).values())
    fixed = estimate_tokens(load_prompt("baselines", "answer") + state["question"])
    budget = ctx.full_context_max_tokens - fixed
    # The newest turns win when everything does not fit: pack from the newest back, stop at the first
    # turn that does not fit (no older turn after a gap), then show them in conversation order.
    packed = pack(reversed(turns), budget, lambda turn: estimate_tokens(turn.render()))
    kept = packed.kept[::-1]
    shown = [t.id for t in kept]
    context_record = emit("full_context", n_turns=len(turns), n_shown=len(kept),
                          left_out=len(turns) - len(kept), prompt_tokens_est=packed.used,
                          shown_turn_ids=shown)
    update = _answer_from(state, ctx, [t.render() for t in kept], shown, "full_context")
    update["masks"] = shown
    update["shown_turn_ids"] = shown
    update["retrieved_turn_ids"] = [t.id for t in turns]  # the whole history is the candidate set
    update["trace"] = context_record + update["trace"]
    return update


rag_builder = StateGraph(MemoryState, context_schema=BaselineContext, input_schema=InputState,
                         output_schema=OutputState)
rag_builder.add_node("retrieve", rag_retrieve)
rag_builder.add_node("answer", rag_answer)
rag_builder.add_edge("retrieve", "answer")
wire_question_lifecycle(rag_builder, "retrieve", "answer", "rag")
rag = rag_builder.compile()
rag.name = "rag"

full_context_builder = StateGraph(MemoryState, context_schema=BaselineContext, input_schema=InputState,
                                  output_schema=OutputState)
full_context_builder.add_node("answer", full_context_answer)
wire_question_lifecycle(full_context_builder, "answer", "answer", "full_context")
full_context = full_context_builder.compile()
full_context.name = "full_context"


def recursion_limit(ctx: BaselineContext) -> int:
    """Both baselines run a fixed handful of steps."""
    return 10
