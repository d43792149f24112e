"""Ingestion: store a conversation's turns in a namespace, then run each method's builder.

Builders are registered by name in `BUILDERS` as "module:function" strings (imported lazily, so a
method's heavy imports cost nothing until it is used). A builder has the signature
`build(ws, namespace, conversation, ctx, progress) -> BuildReport`; it must be idempotent (content
hashes and the LLM cache make a second run free) and incremental (new sessions extend what exists).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from recollect.dialogue.json_input import check_json_value
from recollect.dialogue.models import Conversation
from recollect.graphs.registry import (
    AllMethodsContext,
    available_builders,
    load_builder,
)
from recollect.memory.build import BuildReport, tqdm_progress
from recollect.memory.build_status import set_status, statuses
from recollect.memory.workspace import (
    NamespaceError,
    NamespaceInfo,
    Workspace,
    open_workspace,
    validate_namespace,
)
from recollect.settings import Context


def ingest_conversation(
    conversation: Conversation,
    namespace: str,
    ctx: Context | None = None,
    methods: Iterable[str] | None = None,
    ws: Workspace | None = None,
    show_progress: bool = False,
) -> list[BuildReport]:
    ctx = ctx or AllMethodsContext()
    validate_namespace(namespace)
    # Loaders refuse such text already; a Conversation built in Python is checked here, before anything
    # (a vector collection, the registry entry) is written, so a failed ingest leaves nothing behind.
    check_json_value(conversation.to_dict(), f"conversation {conversation.id!a}")
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
        if name in statuses(ws, namespace):  # a background build `remember` queued is done now too
            set_status(ws, namespace, name, "done", sessions=len(full.sessions), seconds=report.seconds,
                       llm_calls=report.llm_calls, fallbacks=report.fallbacks[:20])
        reports.append(report)
    return reports
