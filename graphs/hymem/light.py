"""HyMem's light module: one call answers from the top `hymem_light_k` Level-1 summaries (the spec) or from the
best-ranked turns grouped by session (`hymem_light_turn_tokens`, light_turns.py), or says they are not enough
(README.md in this folder, "Nodes")."""

from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime

from recollect.budget import pack
from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.graphs.hymem.common import (
    EMPTY_STORE,
    answer_style,
    numbered,
    pool_line,
    round_of,
    summary_line,
    top_summaries,
    turns_of,
)
from recollect.graphs.hymem.layout import budget_prompt
from recollect.graphs.hymem.light_turns import TurnLines, turn_memory
from recollect.graphs.hymem.replies import MAX_TOKENS, LightReply, LightTurnsReply, call_kept
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.state import HyMemState
from recollect.llm.usage import estimate_tokens
from recollect.memory.vectors import Unit
from recollect.steps import clean_answer, grounded_in, is_no_info, workspace
from recollect.trace import emit

_WORD = re.compile(r"[a-z0-9]+")


def turn_supports(ctx: HyMemContext, namespace: str, memory: TurnLines, used: list[str],
                  answer: str) -> tuple[list[str], str]:
    """Turns behind a light answer read from turns (hymem_light_turn_tokens), and where they came from: those
    it cited, else the shown turns sharing the most words with it, else every shown turn (and every shown turn
    with hymem_light_supports=all_shown)."""
    if ctx.hymem_light_supports == "all_shown":
        return list(memory.shown), "all shown turns"
    cited = TurnIdMatcher(memory.shown).resolve(used)
    if cited:
        return cited, "turns the light call cited"
    turns = workspace(ctx).turns(namespace)
    words = {w for w in _WORD.findall(answer.lower()) if len(w) >= 3}
    overlap = [len(words & set(_WORD.findall(turns[t].full_text.lower()))) for t in memory.shown]
    best = max(overlap, default=0)
    if best > 0:
        return [t for t, n in zip(memory.shown, overlap, strict=True) if n == best], "turns sharing the answer's words"
    return list(memory.shown), "all shown turns (no citation, no overlap)"


def light_supports(ctx: HyMemContext, kept: list[Unit], used: list[int],
                   answer: str) -> tuple[list[str], str]:
    """Turns behind a light answer, and where they came from (hymem_light_supports)."""
    if ctx.hymem_light_supports == "all_shown":
        return turns_of(kept), "all shown summaries"
    cited = [kept[i] for i in dict.fromkeys(used) if 0 <= i < len(kept)]
    if cited:
        return turns_of(cited), "summaries the light call cited"
    # No usable citation: the summaries sharing the most words with the answer, if any share one.
    words = {w for w in _WORD.findall(answer.lower()) if len(w) >= 3}
    overlap = [len(words & set(_WORD.findall(u.text.lower()))) for u in kept]
    best = max(overlap, default=0)
    if best > 0:
        best_units = [u for u, n in zip(kept, overlap, strict=True) if n == best]
        return turns_of(best_units), "summaries sharing the answer's words"
    return turns_of(kept), "all shown summaries (no citation, no overlap)"


def in_turns(ctx: HyMemContext, namespace: str, answer: str, turn_ids: list[str]) -> bool:
    """The answer's content words are in these turns' text or date (hymem_light_grounding)."""
    turns = workspace(ctx).turns(namespace)
    sources = [f"{t.date_time} {t.full_text}" for tid in turn_ids if (t := turns.get(tid)) is not None]
    return grounded_in(answer, sources)


def light_from_turns(state: HyMemState, ctx: HyMemContext, ns: str, question: str, query: str,
                     rnd: int) -> dict[str, Any]:
    """The light round reading the best-ranked turns (hymem_light_turn_tokens): the same decisions, routes and
    grounding as the spec's round, with turns where it has summaries."""
    pool = pool_line(state.get("draft_answer")) if rnd > 0 else []
    fixed = estimate_tokens(budget_prompt(ctx, "light_turns") + question + "".join(pool)) + MAX_TOKENS
    memory = turn_memory(workspace(ctx), ns, query, min(ctx.hymem_light_turn_tokens, max(ctx.max_prompt_tokens - fixed, 0)))
    base: dict[str, Any] = {"query": query, "iteration": rnd}
    if not memory.shown:
        return {**base, "hymem_light_ids": [], "evidence": [], "hymem_route": "deep",
                "hymem_light_why": EMPTY_STORE,
                "trace": emit("light", round=rnd, query=query, decision="deep", why=EMPTY_STORE, calls=0)}
    lines = memory.lines + pool
    res, sent = call_kept(ctx, "light_turns", LightTurnsReply, "light", question=question,
                          context="\n".join(lines), style=answer_style(ctx, "light_turns"))
    reply = res.value
    text = clean_answer(reply.answer) if reply is not None else ""
    answered = reply is not None and reply.finished == 0 and not is_no_info(text)
    why = light_why(reply is not None, answered, reply.finished if reply is not None else None, "turns")
    update: dict[str, Any] = {
        **base, "hymem_light_ids": list(memory.shown), "evidence": lines,
        "hymem_route": "reflect" if answered else "deep", "usage": res.usage,
        "shown_turn_ids": list(memory.shown), "retrieved_turn_ids": list(memory.retrieved), "hymem_exchange": sent,
    }
    supports_from = None
    ungrounded = None
    if answered:
        assert reply is not None
        supports, supports_from = turn_supports(ctx, ns, memory, reply.used, text)
        if ctx.hymem_light_grounding and not in_turns(ctx, ns, text, supports):
            ungrounded, answered = text, False
            why = "light answer not found in the turns it rests on: escalate to deep"
            update["hymem_route"] = "deep"
        else:
            update.update(draft_answer=text, hymem_status="light", supports=supports)
    update["hymem_light_why"] = why
    update["trace"] = emit(
        "light", round=rnd, query=query, question=question, memory="turns", turn_ids=list(memory.shown),
        not_shown_for_budget=memory.retrieved[len(memory.shown):], finished=reply.finished if reply else None,
        answer=text if answered else None, used=reply.used if reply else None, decision=update["hymem_route"],
        why=why, supports=update.get("supports"), supports_from=supports_from, ungrounded_answer=ungrounded,
        shown_turn_ids=list(memory.shown), **(res.failure_note() if reply is None else {}),
    )
    return update


def light_why(valid: bool, answered: bool, finished: int | None, memory: str) -> str:
    """Why a light round answered or escalated; `memory` names what it read ("summaries" or "turns")."""
    if not valid:
        return "light output invalid after a retry: escalate to deep"
    if answered:
        return f"light judged the {memory} sufficient"
    if finished == 0:
        return ("light said finished=0 without a real answer (empty, no information or JSON): "
                "treated as insufficient")
    return f"light judged the {memory} insufficient (finished=2)"


def light(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    ns = state["namespace"]
    workspace(ctx).require_namespace(ns)
    question = state["question"]
    query = state.get("query") or question
    rnd = round_of(state)
    if ctx.hymem_light_turn_tokens:
        return light_from_turns(state, ctx, ns, question, query, rnd)
    units = top_summaries(ctx, ns, query, ctx.hymem_light_k)
    base: dict[str, Any] = {"query": query, "iteration": rnd}
    if not units:
        return {**base, "hymem_light_ids": [], "evidence": [], "hymem_route": "deep",
                "hymem_light_why": EMPTY_STORE,
                "trace": emit("light", round=rnd, query=query, decision="deep", why=EMPTY_STORE, calls=0)}

    # The memory pool (previous answer) joins from round 2 on; drafts only exist after round 1.
    pool = pool_line(state.get("draft_answer")) if rnd > 0 else []
    # Budget in code: drop the lowest-ranked summaries only if the prompt would overflow; the best one
    # is always shown, so the call never goes out without memory.
    fixed = estimate_tokens(budget_prompt(ctx, "light") + question + "".join(pool)) + MAX_TOKENS
    packed = pack(units, ctx.max_prompt_tokens, lambda u: estimate_tokens(summary_line(u)), used=fixed,
                  keep_first=True)
    kept = packed.kept
    lines = [numbered(i, u) for i, u in enumerate(kept)] + pool
    shown = turns_of(kept)
    res, sent = call_kept(ctx, "light", LightReply, "light", question=question, context="\n".join(lines),
                          style=answer_style(ctx, "light"))
    reply = res.value
    text = clean_answer(reply.answer) if reply is not None else ""
    answered = reply is not None and reply.finished == 0 and not is_no_info(text)
    why = light_why(reply is not None, answered, reply.finished if reply is not None else None, "summaries")
    update: dict[str, Any] = {
        **base,
        "hymem_light_ids": [u.id for u in kept],
        "evidence": lines,
        "hymem_route": "reflect" if answered else "deep",
        "usage": res.usage,
        "shown_turn_ids": shown,
        "retrieved_turn_ids": turns_of(units),  # the top summaries' linked turns, before the prompt budget
        "hymem_exchange": sent,
    }
    supports_from = None
    ungrounded = None
    if answered:
        assert reply is not None
        supports, supports_from = light_supports(ctx, kept, reply.used, text)
        if ctx.hymem_light_grounding and not in_turns(ctx, ns, text, supports):
            ungrounded, answered = text, False
            why = "light answer not found in the turns its summaries link to: escalate to deep"
            update["hymem_route"] = "deep"
        else:
            update.update(draft_answer=text, hymem_status="light", supports=supports)
    update["hymem_light_why"] = why
    update["trace"] = emit(
        "light", round=rnd, query=query, question=question, summary_ids=[u.id for u in kept],
        dropped_for_budget=[u.id for u in packed.dropped], finished=reply.finished if reply else None,
        answer=text if answered else None, used=reply.used if reply else None, decision=update["hymem_route"],
        why=why, supports=update.get("supports"), supports_from=supports_from, ungrounded_answer=ungrounded,
        shown_turn_ids=shown, **(res.failure_note() if reply is None else {}),
    )
    return update
