"""The conversation's turns as MGRetrieval's rounds see them: order, dates, memory items and the
nearest turns (README.md in this folder, "The retrieval pyramid"). Relevance to the question
(`mg_turn_ranking`: cosine or fused with BM25) is the shared `recollect.memory.turn_ranking`.
"""

from __future__ import annotations

from typing import Any

from recollect.dialogue.models import Turn
from recollect.memory.turn_ranking import TurnRanking, top_by_similarity
from recollect.memory.workspace import Workspace


def turn_order(ws: Workspace, namespace: str) -> dict[str, int]:
    """Turn id → its position in the conversation."""
    return {tid: i for i, tid in enumerate(ws.turns(namespace))}


def session_dates(ws: Workspace, namespace: str) -> dict[str, str]:
    """Turn id → its session's day-precision date (the `(session date)` of each memory line)."""
    out: dict[str, str] = {}
    for s in ws.sessions(namespace):
        for t in s.turns:
            out[t.id] = s.date or s.date_time
    return out


def memory_item(turn: Turn, date: str) -> dict[str, Any]:
    """A turn as a memory of the assess and rewrite prompts (`recollect.answer_rewrite.memory_line`)."""
    return {"id": turn.id, "text": f"{turn.speaker}: {turn.full_text}", "date": date}


def dense_turns(ws: Workspace, namespace: str, question: str, exclude: set[str], n: int,
                ranking: TurnRanking = "cosine") -> list[str]:
    """The n turns nearest the question, none of them in `exclude` (in no set order).

    Exact cosine over the shared turn collection's stored vectors (the capping relevance, fused with
    BM25 under "hybrid"), so ties go to the earlier turn and the result never depends on the vector
    index's approximate search.
    """
    if n <= 0:
        return []
    candidates = [t for t in ws.turns(namespace) if t not in exclude]  # conversation order
    return top_by_similarity(ws, namespace, question, candidates, n, ranking)
