"""What HyMem's light call reads with `hymem_light_turn_tokens` > 0 (README.md in this folder, "Changes from
the paper"): the conversation's turns best ranked for the query, grouped by session under its date.

The spec's light call reads the top-k Level-1 summaries alone. On the decisive eval's memory (119 questions with
gold turns, no model; `benchmarks/hymem_light_memory.py`) the top 30 summaries link 56 % of the gold turns but
show the model none of their words; the raw turns of the best-ranked summaries reach 41 % within rag's 1,280
tokens, and the turns ranked by cosine and BM25 fused (`recollect.memory.turn_ranking`, as MGRetrieval ranks
them) 70 % with their session headers. So the light call searches Level-2 directly; Level-1 keeps its place in
the deep path, which selects summaries and reads their sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recollect.graphs.hymem.memory import summary_index, turn_line
from recollect.llm.usage import estimate_tokens
from recollect.memory.turn_ranking import ranked_turns
from recollect.memory.workspace import Workspace

SCAN = 80  # best-ranked turns considered; about twice what 1,280 tokens of turn lines hold


@dataclass
class TurnLines:
    """The light prompt's memory in this mode: its lines, the turns shown (dialogue order) and the turns the
    ranking brought in (rank order, up to the first that did not fit)."""

    lines: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)


def session_header(session: int, date: str) -> str:
    """The header of a session's lines, as Level-2 writes it (memory.py)."""
    return f"Session S{session}, {date or 'date unknown'}"


def turn_memory(ws: Workspace, namespace: str, query: str, budget: int) -> TurnLines:
    """The turns ranked best for `query` (cosine and BM25 fused) while their lines and their sessions' headers
    fit `budget` tokens (the first always fits), shown in dialogue order under one dated header per session."""
    out = TurnLines()
    if not summary_index(ws, namespace).count():
        return out  # no HyMem memory in this namespace: the light node says so
    turns = ws.turns(namespace)
    sessions: set[int] = set()
    used = 0
    for tid in ranked_turns(ws, namespace, query, list(turns), SCAN, "hybrid"):
        out.retrieved.append(tid)
        turn = turns[tid]
        cost = estimate_tokens(f"  {turn_line(turn)}")
        if turn.session not in sessions:
            cost += estimate_tokens(session_header(turn.session, turn.date_time))
        if used + cost > budget and out.shown:
            break
        out.shown.append(tid)
        sessions.add(turn.session)
        used += cost
    position = {tid: i for i, tid in enumerate(turns)}  # conversation order
    out.shown.sort(key=position.__getitem__)
    for tid in out.shown:
        turn = turns[tid]
        if turn.session in sessions:
            out.lines.append(session_header(turn.session, turn.date_time))
            sessions.discard(turn.session)
        out.lines.append(f"  {turn_line(turn)}")
    return out
