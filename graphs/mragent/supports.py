"""MRAgent's answer supports: cited ids mapped to shown turns, and the fallbacks when none is usable.

A support is always a turn whose text (raw, or as an event sentence) was shown to the model, so an
answer never cites what the model did not read.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from recollect.graphs.mragent.layout import turn_of
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.store import CueTagGraph
from recollect.steps import contains_answer, grounded_supports


def _leading_id(turn_ids: list[str]) -> re.Pattern[str] | None:
    """Matches a cited item that starts with one of `turn_ids`, as an id or a sentence id, optionally in
    brackets, and then ends or goes on after a separator: `D1:1`, `[D1:3-1] …`, `D1:1: Maya: …`.

    Built from the ids themselves (longest first, so `D1:12` is not read as `D1:1`), since turn ids can
    have any shape; a digit or letter right after the id means another id (`D1:12x` names nothing).
    """
    if not turn_ids:
        return None
    ids = "|".join(re.escape(t) for t in sorted(turn_ids, key=len, reverse=True))
    return re.compile(rf"\[?({ids})(?:-\d+)?\]?(?=$|[\s:|,)\]])")


def map_supports(cited: list[str], visible: list[str], turns: Collection[str]) -> list[str]:
    """Cited ids → turn ids (sentence → its turn; topic ids dropped), kept only if shown.

    `visible` holds every id the prompts showed (turns, sentences, topics); `turns` the namespace's turn ids.
    """
    shown = [t for t in dict.fromkeys(visible) if t in turns]
    # A small model often cites the whole line it read ("D1:1: Maya: …" or "[D1:1] …"): its leading id.
    leading = _leading_id(shown)
    out: list[str] = []
    for ident in cited:
        lead = leading.match(str(ident).strip()) if leading is not None else None
        tid = lead[1] if lead else None
        if tid is not None and tid not in out:
            out.append(tid)
    return out


def cited_memories(g: CueTagGraph, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for tid in ids:
        turn = g.turns[tid]
        out.append({"id": tid, "text": f"{turn.speaker}: {turn.full_text}", "date_time": turn.date_time,
                    "why": "cited in the answer"})
    return out


def answer_memories(g: CueTagGraph, supports: list[str], kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cited turns first, then the memories kept along the way (H) that are not among them."""
    return cited_memories(g, supports) + [m for m in kept if m["id"] not in supports]


def answer_supports(ctx: MRAgentContext, namespace: str, text: str, shown_turns: list[str], visible: list[str],
                     g: CueTagGraph | None, note: dict[str, Any]) -> list[str]:
    """Supports for an answer whose citations were unusable, never naming an unseen turn."""
    # Shown turns whose raw text contains the answer (the shared guard keeps "No" out of "know").
    supports = grounded_supports(ctx, namespace, text, shown_turns)
    if supports:
        note["supports_from"] = "shown turns containing the answer text"
        return supports
    if g is None:
        return []
    # Still none: a shown event sentence (the rewritten text the model read) containing the answer
    # names its turn. Only events in `visible`, so no unseen turn is ever cited.
    for eid in visible:
        ev = g.events.get(eid)
        tid = turn_of(eid, g.turns)
        if ev and tid and tid not in supports and contains_answer(text, str(ev.get("text", ""))):
            supports.append(tid)
    if supports:
        note["supports_from"] = "shown event sentences containing the answer text"
    return supports
