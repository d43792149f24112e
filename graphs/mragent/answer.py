"""MRAgent's answer node: the navigate answer, the forced final call (final.py) or, with
`mra_final_answer_tokens`, rag's answer step over the turns the loop showed; then the optional span rewrite and
the supports (README.md in this folder, "Nodes")."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from recollect.answer_rewrite import REWRITE_MEMORIES, rewrite_answer
from recollect.graphs.mragent.final import forced_reply
from recollect.graphs.mragent.prompting import shown_update
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.state import MRAgentState
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.supports import answer_memories, answer_supports, map_supports
from recollect.llm.usage import merge_usage
from recollect.spans import is_short_span
from recollect.state import union_ids
from recollect.steps import NO_INFO, is_no_info, workspace
from recollect.trace import emit
from recollect.turn_answer import TurnAnswer, with_neighbours
from recollect.turn_continue import final_turn_answer


def answer(state: MRAgentState, runtime: Runtime[MRAgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    g = CueTagGraph.load(workspace(ctx), state["namespace"])
    draft = (state.get("draft_answer") or "").strip()
    usage: dict[str, Any] = {}
    note: dict[str, Any] = {}
    update: dict[str, Any] = {}
    forced = not draft
    visible = list(state.get("mra_visible_ids") or [])
    shown_turns = list(state.get("masks") or [])
    final: TurnAnswer | None = None
    if ctx.mra_final_answer_tokens:
        # Our addition (0 = the spec): the answer written as rag writes it from the turns the loop showed and
        # returned, the navigate answer's citations first (recollect.turn_answer). It replaces the forced call,
        # which runs only when this one gives no answer and there is no navigate answer to keep.
        cited_first = map_supports(list(state.get("supports") or []), visible, g.turns) if draft else []
        looked_at = shown_turns + list(state.get("retrieved_turn_ids") or [])
        chosen = with_neighbours(g.ws.turns(state["namespace"]), looked_at, ctx.mra_final_neighbours)
        # issue 34: with mra_final_answer_continues the navigate exchange is continued, so a prompt cache serves it
        sent = state.get("mra_exchange") if ctx.mra_final_answer_continues else None
        final = final_turn_answer(ctx, state["namespace"], state["question"], cited_first, chosen,
                                  ctx.mra_final_answer_tokens, sent, ("final_answer", "mragent_continue"),
                                  shown_before=state.get("masks") or [])
        neighbours = [t for t in chosen if t not in set(looked_at)]
        usage, note = final.usage, {"final_draft": draft or None, **final.trace, "final_neighbours": neighbours}
        update["retrieved_turn_ids"] = neighbours  # brought in by this step (the state's union keeps the rest)
        shown_turns += [t for t in final.shown if t not in set(shown_turns)]
        update.update(masks=final.shown, shown_turn_ids=final.shown)
    if final is not None and final.answer:
        text, cited, conf = final.answer, final.supports, state.get("mra_confidence")
        visible += final.shown
        if draft:
            update["answer_before_rewrite"] = draft
    elif draft:
        text, cited, conf = draft, list(state.get("supports") or []), state.get("mra_confidence")
        if final is not None:
            note["fallback"] = "the final answer call gave no answer: the navigate answer stands"
    else:
        if final is not None:
            note["fallback"] = "the final answer call gave no answer: the forced final call answers"
        shown, reply, forced_usage, content, layout = forced_reply(state, ctx, g)
        usage = merge_usage(usage, forced_usage)
        forced_shown = shown_update(state, shown)
        merged = union_ids(update.get("masks"), forced_shown["masks"])  # the final call's turns, then these
        update.update(forced_shown, masks=merged, shown_turn_ids=merged)
        visible += shown.visible
        shown_turns += forced_shown["masks"]
        if reply is not None and reply.answer.strip():
            text, cited, conf = reply.answer.strip(), reply.supports, reply.confidence
        else:
            text, cited, conf = NO_INFO, [], None
            note["fallback"] = True
            note["raw"] = content[:300]
        note.update(shown_turn_ids=forced_shown["masks"], not_shown_for_room=shown.not_shown, answer_prompt=layout)
    supports = map_supports(cited, visible, g.turns)
    draft_text = text
    if ctx.mra_answer_rewrite and text and not is_no_info(text) and is_short_span(text, ctx.mra_rewrite_skip_words):
        note.update(skipped_call="rewrite_answer", skip_reason=f"the answer is already a span of at most "
                    f"{ctx.mra_rewrite_skip_words} words with no digit (mra_rewrite_skip_words)")
    elif ctx.mra_answer_rewrite and text and not is_no_info(text):
        # Our addition (false = spec): the span rewrite, shown the cited turns and then the kept memories.
        shown_mems = answer_memories(g, supports, state.get("critical_memories") or [])[:REWRITE_MEMORIES]
        rewritten = rewrite_answer(ctx, state["question"], text, shown_mems, node="rewrite_answer")
        text = rewritten.answer
        usage = merge_usage(usage, rewritten.usage)
        note.update(rewritten.trace_fields(draft_text))
        update["answer_before_rewrite"] = update.get("answer_before_rewrite") or draft_text
    for candidate in dict.fromkeys([text, draft_text]):  # the span first: it is likelier to occur verbatim
        if supports or not candidate or is_no_info(candidate):
            break
        supports = answer_supports(ctx, state["namespace"], candidate, shown_turns, visible, g, note)
    crit = answer_memories(g, supports, state.get("critical_memories") or [])
    return {
        **update,
        "answer": text or NO_INFO,
        "supports": supports,
        "critical_memories": crit,
        "mra_confidence": conf,
        "mra_forced_final": forced,
        "usage": usage,
        "trace": emit("answer", answer=text or NO_INFO, forced=forced, llm_call=forced or final is not None,
                      cited=cited, supports=supports, dropped_citations=[c for c in cited if c not in supports],
                      confidence=conf, **note),
    }
