"""MRAgent's answer supports: cited ids mapped to shown turns, and the fallbacks when none is usable.

A support is always a turn whose text (raw, or as an event sentence) was shown to the model, so an
answer never cites what the model did not read.
"""

from __future__ import annotations

import re
from typing import Any

from recollect.graphs.mragent.memory import turn_of
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.store import CueTagGraph
from recollect.steps import contains_answer, grounded_supports

_LEADING_ID = re.compile(r"^\[?(D\d+:\d+(?:-\d+)?)\]?(?=$|[\s:|,)\]])")


def map_supports(cited: list[str], visible: list[str], g: CueTagGraph | None = None) -> list[str]:
    """Cited ids → turn ids (sentence → its turn; topic ids dropped), kept only if shown."""
    vis = set(visible)
    out: list[str] = []
    for ident in cited:
        # A small model often cites the whole line it read ("D1:1: Maya: …" or "[D1:1] …"): its leading id.
        lead = _LEADING_ID.match(str(ident).strip())
        tid = turn_of(lead[1] if lead else str(ident))
        if tid is None or tid not in vis or (g is not None and tid not in g.turns):
            continue
        if tid not in out:
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
        tid = turn_of(eid)
        if ev and tid and tid in g.turns and tid not in supports and contains_answer(text, str(ev.get("text", ""))):
            supports.append(tid)
    if supports:
        note["supports_from"] = "shown event sentences containing the answer text"
    return supports
