"""Absolute dates in a graph's answer (`answer_absolute_dates`): the step `finish_question` runs last.

A relative time the model copied from the dialogue ("next month") is resolved against the date of the turn
that says it (a cited turn first, then one the graph showed the model); the rules are recollect.dates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recollect.dates import DatedTurn, absolute_dates, parse_day, pick_reference, relative_phrases
from recollect.memory.run_store import run_workspace
from recollect.settings import Context
from recollect.state import MemoryState


def _dated_turns(ctx: Context, state: MemoryState, ids: Iterable[str]) -> dict[str, DatedTurn]:
    """The turns `ids` with their session dates: from the turn store, or for a foreign retriever from
    the critical memories (which carry a date only if the retriever's documents had one)."""
    if ctx.retriever is None:
        turns = run_workspace(ctx.data_dir).turns(state["namespace"])
        return {t: DatedTurn(t, turns[t].full_text, parse_day(turns[t].date_time)) for t in ids if t in turns}
    mems = {str(m.get("id")): m for m in state.get("critical_memories") or []}
    return {t: DatedTurn(t, str(mems[t].get("text", "")), parse_day(mems[t].get("date") or mems[t].get("date_time")))
            for t in ids if t in mems}


def absolute_answer_dates(ctx: Context, state: MemoryState, answer: str) -> tuple[str, dict[str, Any] | None]:
    """The answer with relative times and ISO dates made absolute (recollect.dates), and the trace
    record of what changed; (answer, None) when nothing did and nothing was left unresolved."""
    phrases = relative_phrases(answer)
    reference, why = None, None
    if phrases:
        supports = [str(t) for t in state.get("supports") or []]
        shown = [str(t) for t in state.get("shown_turn_ids") or []]
        picked = pick_reference(phrases, supports, shown, _dated_turns(ctx, state, [*supports, *shown]))
        if picked is not None:
            reference, why = picked
    rewrite = absolute_dates(answer, reference.day if reference else None)
    if not rewrite.changes and not rewrite.unresolved:
        return answer, None
    return rewrite.answer, {
        # `model_answer`, not `draft`: the eval's draft columns mean the answer before a graph's rewrite call
        "answer": rewrite.answer, "model_answer": answer, "changes": rewrite.changes,
        "reference_turn": reference.id if reference else None,
        "reference_date": reference.day.isoformat() if reference and reference.day else None,
        "reference_from": why, "unresolved": rewrite.unresolved or None,
    }
