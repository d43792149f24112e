"""Ingestion: store a conversation's turns in a namespace, then run each method's builder.

Builders are registered by name in `BUILDERS` as "module:function" strings (imported lazily, so a
method's heavy imports cost nothing until it is used). A builder has the signature
`build(ws, namespace, conversation, ctx, progress) -> BuildReport`; it must be idempotent (content
hashes and the LLM cache make a second run free) and incremental (new sessions extend what exists).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from recollect.config import Context
from recollect.dialogue.models import Conversation
from recollect.memory.workspace import (
    NamespaceError,
    NamespaceInfo,
    Workspace,
    open_workspace,
    validate_namespace,
)
from tqdm import tqdm

X = TypeVar("X")
Progress = Callable[[Iterable[X], str], Iterable[X]]

BUILDERS: dict[str, str] = {
    "memr3": "recollect.memory.chunks:build_memr3_chunks",
    "mragent": "recollect.graphs.mragent.memory:build",
    "hymem": "recollect.graphs.hymem.memory:build",
    "mgretrieval": "recollect.graphs.mgretrieval.memory:build",
}
# Which builder each graph needs (baselines read MemR3's chunks).
GRAPH_NEEDS: dict[str, str | None] = {
    "memr3": "memr3",
    "rag": "memr3",
    "full_context": None,
    "mragent": "mragent",
    "hymem": "hymem",
    "mgretrieval": "mgretrieval",
}


@dataclass
class BuildReport:
    method: str
    sessions: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedded: int = 0
    seconds: float = 0.0
    fallbacks: list[str] = field(default_factory=list)

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.llm_calls += int(usage.get("calls", 0))
        self.prompt_tokens += int(usage.get("prompt_tokens", 0))
        self.completion_tokens += int(usage.get("completion_tokens", 0))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tqdm_progress(show: bool) -> Progress:
    def wrap(items: Iterable[X], desc: str) -> Iterable[X]:
        return tqdm(items, desc=desc, disable=not show, unit="session", leave=True)

    return wrap


def available_builders() -> list[str]:
    out = []
    for name, target in BUILDERS.items():
        module = target.split(":")[0]
        if importlib.util.find_spec(module) is not None:
            out.append(name)
    return out


def load_builder(name: str) -> Callable[..., BuildReport]:
    if name not in BUILDERS:
        raise ValueError(f"unknown method {name!r} (known: {', '.join(BUILDERS)})")
    module, func = BUILDERS[name].split(":")
    return getattr(importlib.import_module(module), func)


def ingest_conversation(
    conversation: Conversation,
    namespace: str,
    ctx: Context | None = None,
    methods: Iterable[str] | None = None,
    ws: Workspace | None = None,
    show_progress: bool = False,
) -> list[BuildReport]:
    ctx = ctx or Context()
    validate_namespace(namespace)
    ws = ws or open_workspace(ctx.data_dir)
    info = ws.namespace_info(namespace)
    if info is not None and info.conversation_id != conversation.id:
        raise NamespaceError(
            f"namespace {namespace!r} already holds conversation {info.conversation_id!r}; "
            f"ingest {conversation.id!r} into another namespace"
        )
    from recollect.memory.embeddings import embedder_name

    emb = embedder_name(ws.embeddings)
    if info is not None and info.embedder != emb:
        raise NamespaceError(f"namespace {namespace!r} was built with embedder {info.embedder!r}, not {emb!r}")

    start = time.monotonic()
    embedded = ws.store_turns(namespace, conversation)
    sessions = sorted({*(info.sessions if info else []), *(s.index for s in conversation.sessions)})
    new_info = NamespaceInfo(
        name=namespace,
        conversation_id=conversation.id,
        embedder=emb,
        speakers=list(conversation.speakers),
        sessions=sessions,
        built=dict(info.built) if info else {},
    )
    ws.save_namespace(new_info)
    reports = [BuildReport("turns", sessions=len(conversation.sessions), embedded=embedded,
                           seconds=round(time.monotonic() - start, 3))]
    full = ws.conversation(namespace)  # everything stored so far, so builders see all sessions
    progress = tqdm_progress(show_progress)
    for name in methods if methods is not None else available_builders():
        t0 = time.monotonic()
        report = load_builder(name)(ws, namespace, full, ctx, progress)
        report.seconds = round(time.monotonic() - t0, 3)
        ws.mark_built(namespace, name, {"hash": full.content_hash(), "sessions": len(full.sessions)})
        reports.append(report)
    return reports
