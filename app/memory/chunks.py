"""MemR3's chunk store (also the RAG baseline's): turn-aligned chunks inside one session.

Consecutive turns of a session are packed in order into chunks of at most `chunk_tokens`
estimated tokens; a turn is never split (a longer one is a chunk of its own) and no chunk spans
two sessions. Chunk ids are `<conversation_id>:c<n>` numbered in conversation order, so adding
later sessions never renumbers earlier chunks. No LLM call is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from recollect.dialogue.models import Conversation, Turn
from recollect.llm.usage import estimate_tokens
from recollect.memory.vectors import Unit, VectorIndex
from recollect.memory.workspace import Workspace
from recollect.settings import setting

if TYPE_CHECKING:  # imported where a build runs: recollect.memory.build loads tqdm
    from recollect.memory.build import BuildReport, Progress


@dataclass(kw_only=True)
class ChunkSettings:
    """The chunk memory's settings, shared by the graphs that read it (memr3, rag) and the recall tool.

    They keep MemR3's `memr3_` prefix: the chunk memory is MemR3's retrieval backbone, and rag is that
    backbone alone.
    """

    memr3_candidate_k: int = setting(20, "MemR3: candidate pool before reranking", ge=1)
    memr3_chunk_tokens: int = setting(
        256, "MemR3: chunk size in tokens (turn-aligned, within a session); set at ingest", ge=1)
    memr3_rerank: Literal["none", "hybrid"] = setting(
        "hybrid", "MemR3: rerank candidates with BM25 + dense fusion (hybrid) or not (none)")


def chunk_kind(chunk_tokens: int) -> str:
    return f"memr3c{chunk_tokens}"


def chunk_turns(conversation: Conversation, chunk_tokens: int) -> list[Unit]:
    units: list[Unit] = []

    def flush(buf: list[Turn]) -> None:
        if not buf:
            return
        first = buf[0]
        units.append(
            Unit(
                id=f"{conversation.id}:c{len(units) + 1}",
                text="\n".join(t.render() for t in buf),
                turn_ids=[t.id for t in buf],
                metadata={"session": first.session, "date_time": first.date_time},
            )
        )

    for session in conversation.sessions:
        buf: list[Turn] = []
        size = 0
        for turn in session.turns:
            cost = estimate_tokens(turn.render())
            if buf and size + cost > chunk_tokens:
                flush(buf)
                buf, size = [], 0
            buf.append(turn)
            size += cost
        flush(buf)
    return units


def chunk_index(ws: Workspace, namespace: str, ctx: ChunkSettings) -> VectorIndex:
    return ws.index(chunk_kind(ctx.memr3_chunk_tokens), namespace)


def build_memr3_chunks(ws: Workspace, namespace: str, conversation: Conversation, ctx: ChunkSettings,
                       progress: Progress) -> BuildReport:
    from recollect.memory.build import BuildReport

    units = chunk_turns(conversation, ctx.memr3_chunk_tokens)
    index = chunk_index(ws, namespace, ctx)
    stale = sorted({u.id for u in index.all()} - {u.id for u in units})
    index.delete(stale)  # a changed session can shift chunk boundaries
    embedded = index.upsert(units)
    return BuildReport("memr3", sessions=len(conversation.sessions), embedded=embedded)


def turn_ids_in_memory(ws: Workspace, namespace: str, ctx: ChunkSettings) -> set[str]:
    """Turns some indexed chunk holds."""
    return {t for unit in chunk_index(ws, namespace, ctx).all() for t in unit.turn_ids}
