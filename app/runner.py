"""Running graphs by name: registry, checkpointed threads, live step callbacks.

The CLI, the evaluator and the benchmarks all come through `ask`, so a run looks the same
everywhere: the same recursion limit, the same streamed trace records, the same final state.
"""

from __future__ import annotations

import shlex
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from recollect.agent_memory.appends import APPENDS
from recollect.graphs.registry import METHODS as GRAPHS
from recollect.graphs.registry import (
    AllMethodsContext,
    load_graph,
    method_context,
    missing_memory,
    step_limit,
)
from recollect.memory.build_status import unsettled
from recollect.memory.clock import retrieval_clock
from recollect.memory.docstore import use_wal
from recollect.memory.workspace import (
    DataDirError,
    NamespaceError,
    open_workspace,
    usable_data_dir,
    validate_namespace,
)
from recollect.settings import Context, get_settings
from recollect.state import NamespaceBindingError, bind_namespace


class ThreadError(ValueError):
    """A checkpointed thread cannot take this request."""


class MemoryNotBuiltError(NamespaceError):
    """The namespace lacks the memory the asked method reads, or has it for fewer sessions than it holds."""


def memory_store(data_dir: str) -> Any:
    """The LangGraph store holding the data directory's memories (None with the legacy `recollect_db`)."""
    from recollect.memory.store_docs import StoreDocs

    docs = open_workspace(data_dir).docs
    return docs.store if isinstance(docs, StoreDocs) else None


def checkpoint_path(data_dir: str) -> Path:
    """The one checkpoint database of a data directory: the CLI's and `recollect serve`'s threads."""
    return usable_data_dir(data_dir) / "checkpoints.sqlite"


def open_checkpointer(data_dir: str) -> Any:
    """The checkpointer of the CLI and Python runs: LangGraph's `PostgresSaver` on RECOLLECT_POSTGRES_URI's
    database (one per process, shared), else a `SqliteSaver` on the data directory's checkpoints.sqlite.
    `recollect serve` writes the same place (`server_checkpointer`), so history and forget see its threads."""
    from recollect.memory.backends import postgres_saver, postgres_uri

    uri = postgres_uri()
    if uri:
        return postgres_saver(uri)
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = checkpoint_path(data_dir)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    try:
        # The server writes the same file while the CLI reads it (use_wal reads the PRAGMA's row: an unfinished
        # statement keeps a read transaction open, which locks out every other writer).
        use_wal(conn)
    except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
        conn.close()
        raise DataDirError(f"{path}: {exc}") from exc
    return SqliteSaver(conn)


def close_checkpointer(saver: Any) -> None:
    """Close what `open_checkpointer` opened for one caller: a SQLite connection (the Postgres saver and its
    pool are the process's)."""
    if isinstance(getattr(saver, "conn", None), sqlite3.Connection):
        saver.conn.close()


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[Any]:
    """The checkpointer `recollect serve` runs with (langgraph.json `checkpointer.path`): the same
    SQLite file or Postgres database as the CLI, so `recollect history` and `recollect forget` see the
    server's threads."""
    from recollect.memory.backends import async_postgres_saver, postgres_uri

    uri = postgres_uri()
    if uri:
        async with async_postgres_saver(uri) as saver:
            yield saver
        return
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(str(checkpoint_path(get_settings().data_dir)), timeout=30)
    try:
        # Finish the PRAGMA's statement (see open_checkpointer): left open, an idle server holds a
        # read transaction and every CLI write to the data directory fails with "database is locked".
        async with conn.execute("PRAGMA journal_mode=WAL") as cursor:
            await cursor.fetchall()
        saver = AsyncSqliteSaver(conn)
        # The tables now: LangGraph's saver creates them on its first read or write, but deleting a thread
        # is neither, and a fresh data directory's first stateless run (whose temporary thread is deleted
        # after it) logged "no such table: checkpoints".
        await saver.setup()
        yield saver
    finally:
        await conn.close()


def namespace_threads(checkpointer: Any, namespace: str) -> list[str]:
    """Threads whose checkpoints ever read `namespace` (their messages hold its content)."""
    out: dict[str, None] = {}
    for tup in checkpointer.list(None):
        thread = tup.config["configurable"]["thread_id"]
        if thread not in out and (tup.checkpoint.get("channel_values") or {}).get("namespace") == namespace:
            out[thread] = None
    return list(out)


def forget(namespace: str, ctx: Context | None = None, ws: Any = None) -> dict[str, Any]:
    """Delete everything stored for `namespace`: documents, caches, vectors and its threads' checkpoints.

    Idempotent; other namespaces are untouched. Asking the namespace afterwards says it is unknown. `ws`
    is the workspace to delete from (default: the data directory's; the forget graph passes its run's store).
    """
    ctx = ctx or Context()
    validate_namespace(namespace)
    ws = ws or open_workspace(ctx.data_dir)
    removed: dict[str, Any] = ws.forget_namespace(namespace)
    saver = open_checkpointer(ctx.data_dir)
    try:
        threads = namespace_threads(saver, namespace)
        for thread in threads:
            saver.delete_thread(thread)
            ws.docs.delete("", "thread", thread)
    finally:
        close_checkpointer(saver)
    return dict(removed, namespace=namespace, threads=threads)


def require_answerable(namespace: str, method: str, ctx: Context) -> None:
    """Fail before any run or store write when `method` cannot answer from `namespace`.

    Besides an invalid or never-ingested namespace, that is (unless the context injects a retriever)
    memory the method reads that was never built, or built for fewer sessions than the namespace holds:
    the answer would silently ignore what is missing. Memory that `remember` is still extending in the
    background is answered from as it is: the question's trace starts with a `memory_status` record. An error rather than a warning, because no caller
    (CLI, API, recall tool) shows a warning beside the answer, and the fix, an incremental ingest, is cheap.
    """
    validate_namespace(namespace)
    if ctx.retriever is not None:
        return
    ws = open_workspace(ctx.data_dir)
    info = ws.require_namespace(namespace)
    gap = missing_memory(method, info.built, len(info.sessions))
    if gap is None:
        return
    builder, covered = gap
    ns = info.name
    building = unsettled(ws, ns).get(builder)
    if building is not None:
        if covered is not None:
            return  # `remember` is extending it in the background: answer from what is built, the trace says so
        raise MemoryNotBuiltError(f"namespace {ns!r} has no {builder} memory yet: its background build is "
                                  f"{building.get('state')} (`recollect namespaces` shows it); ask again when it is done")
    reads = f"method {method!r}" + ("" if builder == method else f" reads the {builder} memory and")
    command = f"`recollect ingest FILE --namespace {shlex.quote(ns)} --methods {builder}`"
    if covered is None:
        raise MemoryNotBuiltError(f"namespace {ns!r} has no {builder} memory: {reads} cannot answer without it; "
                                  f"build it with {command}")
    raise MemoryNotBuiltError(
        f"namespace {ns!r} has its {builder} memory for {covered} of its {len(info.sessions)} sessions: {reads} "
        f"would miss the rest; complete it with {command} (only the missing sessions are built)"
    )


def _asked_question(values: dict[str, Any]) -> str | None:
    """The thread's last question as the user asked it: `question` may hold a follow-up's standalone
    rewrite, while the human message `question_message_id` names keeps the asked text."""
    wanted = values.get("question_message_id")
    for message in reversed(values.get("messages") or []):
        if getattr(message, "id", None) == wanted and wanted is not None:
            content = message.content
            return content.strip() if isinstance(content, str) else None
    return values.get("question")


def _thread_method(data_dir: str, thread_id: str) -> str | None:
    return open_workspace(data_dir).docs.get("", "thread", thread_id)


def ask(
    namespace: str,
    question: str,
    method: str = "memr3",
    ctx: Context | None = None,
    *,
    checkpointer: Any = None,
    thread_id: str | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Answer `question` from `namespace` with `method`; returns the final state values.

    With a checkpointer, `thread_id` names a conversation: an interrupted run of the same question
    resumes where it stopped; asking a finished thread its last question again returns the stored
    answer; any other question is a new run on the thread, with fresh per-question state and the
    earlier questions and answers kept in its `messages`. A thread keeps one namespace and method.
    """
    # The graph gets its own context: the shared settings and its method's (Studio and the server do the same).
    ctx = method_context(method, ctx or AllMethodsContext())
    question = (question or "").strip()
    if not question:
        raise ValueError("the question is empty")
    compiled = load_graph(method)
    APPENDS.settle(namespace)  # turns a remember node of this process handed off are read too
    require_answerable(namespace, method, ctx)
    # Compiled with the data directory's store, so `runtime.store` in every node is where the memories live.
    store = None if ctx.retriever is not None else memory_store(ctx.data_dir)  # an app's retriever needs none
    g = compiled.builder.compile(checkpointer=checkpointer, store=store, name=method)
    thread_id = thread_id or uuid.uuid4().hex[:12]
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id}, "recursion_limit": step_limit(method, ctx)}
    inputs: dict[str, Any] | None = {"namespace": namespace, "question": question}
    if checkpointer is not None:
        known = _thread_method(ctx.data_dir, thread_id)
        if known and known != method:
            raise ThreadError(f"thread {thread_id!r} belongs to method {known!r}, not {method!r}")
        snap = g.get_state(config)
        if snap.values:
            try:  # the rule the graph's `namespace` channel enforces, checked before the run starts
                bind_namespace(snap.values.get("namespace"), namespace, thread=f"thread {thread_id!r}")
            except NamespaceBindingError as exc:
                raise ThreadError(f"{exc} (pass another --thread)") from None
            if _asked_question(snap.values) == question:
                if not snap.next:
                    return dict(snap.values, thread_id=thread_id, resumed=False)
                inputs = None  # resume the interrupted run from its last checkpoint
        open_workspace(ctx.data_dir).docs.put("", "thread", thread_id, method)

    final: dict[str, Any] = {}
    start = time.monotonic()
    with retrieval_clock() as clock:
        for mode, chunk in g.stream(inputs, config, context=ctx, stream_mode=["custom", "values"]):
            if mode == "custom" and isinstance(chunk, dict) and "trace" in chunk:
                if on_step is not None:
                    on_step(chunk["trace"])
            elif mode == "values":
                final = chunk
    if checkpointer is not None:
        final = dict(g.get_state(config).values)
    final = dict(final)
    final["thread_id"] = thread_id
    final["wall_time_s"] = round(time.monotonic() - start, 3)
    final["retrieval_s"] = round(clock.seconds, 3)  # embedding, vector search, ranking (recollect.memory.clock)
    final["resumed"] = inputs is None
    return final


def history(thread_id: str, ctx: Context | None = None) -> list[dict[str, Any]]:
    """The checkpoints of a thread, oldest first."""
    from recollect.memory.read_only import read_only_checkpointer, read_registry

    ctx = ctx or Context()
    # read-only: it works on a data directory this user may not write, and a thread that is not there
    # leaves no new file behind
    method = read_registry(ctx.data_dir, "thread").get(thread_id)
    saver = read_only_checkpointer(ctx.data_dir)
    if saver is None:
        raise ThreadError(f"no thread {thread_id!r} in {ctx.data_dir}")
    try:
        if method is None:  # a thread run by `recollect serve`: the server records its graph in the metadata
            latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
            method = (latest.metadata or {}).get("graph_id") if latest else None
            if method not in GRAPHS:
                raise ThreadError(f"no thread {thread_id!r} in {ctx.data_dir}")
        g = load_graph(method).builder.compile(checkpointer=saver)
        snaps = list(g.get_state_history({"configurable": {"thread_id": thread_id}}))
    finally:
        close_checkpointer(saver)
    rows = []
    for snap in snaps:
        meta = snap.metadata or {}
        rows.append(
            {
                "checkpoint_id": snap.config["configurable"].get("checkpoint_id"),
                "step": meta.get("step"),
                "source": meta.get("source"),
                "next": list(snap.next),
                "created_at": snap.created_at,
                "question": snap.values.get("question"),
                "iteration": snap.values.get("iteration"),
                "answer": snap.values.get("answer"),
                "n_trace": len(snap.values.get("trace") or []),
            }
        )
    rows.reverse()
    return [dict(r, method=method) for r in rows]

