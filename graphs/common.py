"""Pieces every graph shares: snippet sources, turn-id citations, supports and final answers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, field_validator

from app.config import Context
from app.ingest.chunks import chunk_index
from app.llm.lenient import Text
from app.memory.retriever import ExternalRetriever, MaskedRetriever, SnippetSource
from app.memory.workspace import NamespaceError, Workspace, open_workspace

NO_INFO = "No information available"
TURN_ID = re.compile(r"\bD\d+:\d+\b")


def workspace(ctx: Context) -> Workspace:
    return open_workspace(ctx.data_dir)


def snippet_source(ctx: Context, namespace: str) -> SnippetSource:
    """The injected LangChain retriever if any, else the namespace's masked chunk retriever."""
    if ctx.retriever is not None:
        return ExternalRetriever(ctx.retriever)
    ws = workspace(ctx)
    ws.require_namespace(namespace)
    index = chunk_index(ws, namespace, ctx)
    if index.count() == 0:
        raise NamespaceError(
            f"namespace {namespace!r} has no MemR3 chunks (chunk_tokens={ctx.memr3_chunk_tokens}); "
            f"run `recollect ingest FILE --namespace {namespace}`"
        )
    return MaskedRetriever(index, candidate_k=ctx.memr3_candidate_k, rerank=ctx.memr3_rerank)


def cited_ids(texts: Iterable[str]) -> list[str]:
    """Turn ids cited in free text, in first-seen order."""
    seen: dict[str, None] = {}
    for text in texts:
        for tid in TURN_ID.findall(text or ""):
            seen.setdefault(tid, None)
    return list(seen)


def critical_from_turns(ctx: Context, namespace: str, ids: Iterable[str], fallback: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`{id, text}` for each id, from the turn store (or `fallback` texts for foreign retrievers)."""
    turns = workspace(ctx).turns(namespace) if ctx.retriever is None else {}
    out = []
    for tid in ids:
        turn = turns.get(tid)
        if turn is not None:
            out.append({"id": tid, "text": f"{turn.speaker}: {turn.full_text}", "date_time": turn.date_time})
        elif fallback and tid in fallback:
            out.append({"id": tid, "text": fallback[tid]})
    return out


def grounded_supports(ctx: Context, namespace: str, answer: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """Shown turns whose text contains the answer: the last resort when the model cited no ids.

    Small models often answer correctly but forget the ids; a verbatim match in a turn that was
    actually shown is evidence the answer rests on, and it never adds an unseen turn.
    """
    needle = " ".join((answer or "").lower().split()).strip(" .")
    if len(needle) < 3 or needle == NO_INFO.lower() or ctx.retriever is not None:
        return []
    turns = workspace(ctx).turns(namespace)
    out = []
    for tid in candidates:
        turn = turns.get(tid)
        if turn is not None and needle in " ".join(turn.full_text.lower().split()):
            out.append(tid)
            if len(out) >= limit:
                break
    return out


def messages(system: str | None, user: str) -> list:
    return ([SystemMessage(content=system)] if system else []) + [HumanMessage(content=user)]


class AnswerReply(BaseModel):
    """The short final answer and the turn ids it rests on."""

    answer: Text = Field(description="a short phrase")
    supports: list[str] = Field(default_factory=list)

    @field_validator("supports", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            return cited_ids([v])
        return [str(x) for x in v]


def bullets(items: Iterable[str], empty: str = "(none)") -> str:
    lines = [f"- {x}" for x in items if x and x.strip()]
    return "\n".join(lines) if lines else empty
