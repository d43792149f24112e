"""HyMem: dual-granular memory with light / deep / reflect scheduling (README.md in this folder).

START → light ─┬─ answered (finished 0)            → reflect
               └─ insufficient or invalid output    → deep → reflect
reflect ─┬─ satisfied, unusable rewrite, last round → answer → END
         └─ not satisfied with a new query          → light (next round)

`light` answers from the top `hymem_light_k` Level-1 summaries (1 call). `deep` lets the LLM pick
summaries from the top `hymem_deep_n` (one selection call per batch, batches concurrent) and answers
from the linked Level-2 sessions (1 call). `reflect` judges the draft and may rewrite the retrieval
query (1 call, skipped on the last round). `answer` writes the final answer as rag does from the turns the
rounds showed, the draft's supports first (1 call, `hymem_final_answer_tokens`; the spec's `answer` calls no
model and returns the draft), then may rewrite it into a short span (1 call, `hymem_answer_rewrite`, off).
Retrievers (the cosine search and the deep selection call, Algorithm 1 line 10) see the current query
q_i; generators
always see the original question q0 plus the previous answer (memory pool).

An answer is only ever text a model wrote as its answer: an empty, "no information" or JSON-only
reply never becomes the draft, and never replaces a real answer from an earlier round.

The nodes live in `light.py`, `deep.py` and `reflect.py`; this module holds `answer`, the edges and
the compiled `graph`.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from recollect.answer_rewrite import REWRITE_MEMORIES, rewrite_answer
from recollect.graphs.hymem.common import round_of
from recollect.graphs.hymem.deep import deep
from recollect.graphs.hymem.light import light
from recollect.graphs.hymem.reflect import reflect
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.state import HyMemState
from recollect.llm.usage import merge_usage
from recollect.spans import is_short_span
from recollect.state import InputState, OutputState
from recollect.steps import NO_INFO, clean_answer, critical_from_turns, is_no_info, wire_question_lifecycle
from recollect.trace import emit
from recollect.turn_continue import final_turn_answer


def answer(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    draft = clean_answer(state.get("draft_answer"))
    draft = "" if is_no_info(draft) else draft
    text = draft or NO_INFO
    shown = set(state.get("shown_turn_ids") or [])
    supports = [t for t in state.get("supports") or [] if t in shown] if draft else []
    critical = critical_from_turns(ctx, state["namespace"], supports)
    status = state.get("hymem_status")
    if not draft:
        why = "no module produced an answer (empty store or nothing retrievable)"
    elif status == "light":
        why = "the light module answered from Level-1 summaries"
    else:
        why = "the deep module answered from Level-2 sessions after: " + (state.get("hymem_light_why") or "?")
    usage: dict[str, Any] = {}
    note: dict[str, Any] = {}
    if ctx.hymem_final_answer_tokens and state.get("shown_turn_ids"):
        # Our addition (0 = the spec): the answer written as rag writes it, from the turns HyMem's rounds
        # showed, the draft's supports first (recollect.turn_answer). No usable reply keeps the draft.
        shown_ids = list(state.get("shown_turn_ids") or [])
        # issue 34: with hymem_final_answer_continues the last light or deep exchange is continued, so a prompt
        # cache serves what it read
        sent = state.get("hymem_exchange") if ctx.hymem_final_answer_continues else None
        final = final_turn_answer(ctx, state["namespace"], state["question"], supports, shown_ids,
                                  ctx.hymem_final_answer_tokens, sent, ("final_answer", "hymem_continue"),
                                  shown_before=shown_ids)
        usage, note = final.usage, {"final_draft": draft or None, **final.trace}
        if final.answer:
            text, supports = final.answer, final.supports
            critical = critical_from_turns(ctx, state["namespace"], supports)
            why = ("the final answer call wrote the answer from the turns HyMem showed (hymem_final_answer_tokens); "
                   + ("its draft: " + why if draft else "no module had a draft"))
        elif draft:
            note["fallback"] = "the final answer call gave no answer: the draft stands"
    if draft and ctx.hymem_answer_rewrite and is_short_span(text, ctx.hymem_rewrite_skip_words):
        note = {**note, "skipped_call": "rewrite_answer", "skip_reason": f"the answer is already a span of at most "
                f"{ctx.hymem_rewrite_skip_words} words with no digit (hymem_rewrite_skip_words)"}
    elif draft and ctx.hymem_answer_rewrite:
        # Our addition (false = the spec): the span rewrite, shown the turns the answer rests on.
        rewritten = rewrite_answer(ctx, state["question"], text, critical[:REWRITE_MEMORIES], node="rewrite_answer")
        before = text
        text, usage = rewritten.answer, merge_usage(usage, rewritten.usage)
        note = {**note, "calls": note.get("calls", 0) + 1, **rewritten.trace_fields(before)}
    return {
        "answer": text,
        "supports": supports,
        "critical_memories": critical,
        "usage": usage,
        # the eval scores the draft too, to show what the final call or the rewrite did (None when neither ran)
        "answer_before_rewrite": draft if draft and note.get("calls") else None,
        "trace": emit("answer", answered_by=status if draft else None, why=why, rounds=round_of(state) + 1,
                      answer=text, supports=supports, **{"calls": 0, **note}),
    }


def route_after_light(state: HyMemState) -> Literal["deep", "reflect"]:
    return "reflect" if state.get("hymem_route") == "reflect" else "deep"


def route_after_reflect(state: HyMemState) -> Literal["light", "answer"]:
    return "light" if state.get("hymem_next") == "light" else "answer"


builder = StateGraph(HyMemState, context_schema=HyMemContext, input_schema=InputState,
                     output_schema=OutputState)
builder.add_node("light", light)
builder.add_node("deep", deep)
builder.add_node("reflect", reflect)
builder.add_node("answer", answer)
builder.add_conditional_edges("light", route_after_light, ["deep", "reflect"])
builder.add_edge("deep", "reflect")
builder.add_conditional_edges("reflect", route_after_reflect, ["light", "answer"])
wire_question_lifecycle(builder, "light", "answer", "hymem")

graph = builder.compile()
graph.name = "hymem"


def recursion_limit(ctx: HyMemContext) -> int:
    """LangGraph steps a run may take with these settings (rounds times the nodes of a round, plus the
    rest)."""
    return 6 * ctx.hymem_max_rounds + 10
