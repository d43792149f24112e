"""recollect as a running agent's memory: remember a chat's newest turns, without making the reply wait.

```python
from recollect import create_remember_node, remember, wait_for_builds

messages = [("user", "My dog is called Biscuit."), ("assistant", "Noted!")]
remember(messages, namespace="alice", thread_id="t1")   # after the agent replied; again adds nothing
node = create_remember_node(namespace="{user_id}")      # the same as a graph node: builder.add_node("remember", node)
wait_for_builds()                                       # scripts and tests: the background builds are done
```

`remember` appends the turns the namespace does not hold yet (recollect.memory.incremental: sessions are
runs of one thread on one day, turn ids `D<session>:<n>`, the same messages twice add nothing), with their
vectors and MemR3's chunks, and returns: that part calls no model. Every other memory the namespace has
(HyMem, MGRetrieval, MRAgent, or the methods named in `methods=`) is extended by a background build
(recollect.agent_memory.queue), retried when it fails and shown by `recollect namespaces` and in each question's
trace until it is done. A namespace `remember` creates starts with MemR3's chunks only (what `memr3`, `rag`,
`full_context`, `create_recall_tool` and `create_recall_node` read); `methods=["hymem"]` adds HyMem's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from recollect.agent_memory.appends import APPENDS
from recollect.agent_memory.queue import QUEUE
from recollect.dialogue.chat import chat_turns
from recollect.graphs.registry import GRAPH_NEEDS, AllMethodsContext, available_builders
from recollect.memory.build_status import set_status, unsettled
from recollect.memory.incremental import CHUNKS, TURN_VECTORS, append_chat_turns
from recollect.memory.run_store import run_workspace
from recollect.scoping import NamespaceTemplate, check_template, fill_namespace
from recollect.settings import Context
from recollect.trace import emit


def _builders(methods: Iterable[str] | None) -> list[str]:
    """The builders `methods` need: a method's name (`rag` reads MemR3's chunks) or a builder's."""
    known = available_builders()
    out = []
    for name in methods or ():
        builder = GRAPH_NEEDS.get(name, name) if name in GRAPH_NEEDS else name
        if builder is None:
            continue  # full_context reads the turns alone
        if builder not in known:
            raise ValueError(f"unknown method {name!r} (choose from: {', '.join(sorted({*GRAPH_NEEDS, *known}))})")
        out.append(builder)
    return out


def remember(
    messages: Iterable[Any],
    namespace: str,
    *,
    thread_id: str | None = None,
    methods: Iterable[str] | None = None,
    context: Context | None = None,
    user_name: str = "User",
    assistant_name: str = "Assistant",
    background: bool = False,
    wait: bool = False,
    **settings: Any,
) -> dict[str, Any]:
    """Append the chat turns of `messages` that `namespace` does not hold yet; returns what was done.

    `messages`: LangChain messages, role dicts or `(role, content)` pairs, with optional `name` (the
    speaker), `timestamp` and `id` (recollect.dialogue.chat). `thread_id` keeps one conversation's turns
    in their own sessions. `methods` adds memories to build besides the ones the namespace has. The builds
    that call a model run in the background; `wait=True` waits for them (scripts, tests). `background=True`
    hands the append itself to a worker thread too and returns at once (what the remember node does;
    recollect.agent_memory.appends). Returns `{"namespace", "added" (turn ids), "sessions", "skipped"
    (already remembered), "queued" (builders), "seconds", "trace"}` (with `background`, `added` is empty and
    `pending` true).
    """
    base = context if context is not None else AllMethodsContext()
    ctx = base.with_overrides(**settings) if settings else base
    start = time.perf_counter()
    ws = run_workspace(ctx.data_dir)  # here, in the caller's run: a graph's own store is visible only here
    thread = str(thread_id or "")
    turns = chat_turns(messages, thread=thread, user_name=user_name, assistant_name=assistant_name)
    wanted = _builders(methods)
    if background:
        APPENDS.submit(namespace, lambda: _append(ws, namespace, turns, thread, wanted, ctx, start, False),
                       lambda error: _append_failed(ws, namespace, error))
        return {"namespace": namespace, "added": [], "sessions": [], "skipped": 0, "queued": [], "pending": True,
                "seconds": round(time.perf_counter() - start, 4), "trace": []}
    return _append(ws, namespace, turns, thread, wanted, ctx, start, wait)


def _append(ws: Any, namespace: str, turns: list[Any], thread: str, wanted: list[str], ctx: Context, start: float,
            wait: bool) -> dict[str, Any]:
    appended = append_chat_turns(ws, namespace, turns, thread=thread, ctx=ctx)  # type: ignore[arg-type]
    queued: list[str] = []
    info = ws.namespace_info(namespace)
    if info is not None:
        open_builds = unsettled(ws, namespace)
        if "remember" in open_builds:  # an earlier append failed; this one went through
            set_status(ws, namespace, "remember", "done")
        # failed builds, and builds a stopped process left pending: this call runs them again
        retry = {b for b, s in open_builds.items() if b != "remember"
                 and (s.get("state") == "failed" or not QUEUE.active(ws, namespace))}
        needed = set(wanted) | retry
        if appended.added:  # the new turns' vectors, and every memory the namespace has
            needed |= {TURN_VECTORS, *info.built}
        if appended.chunks_extended and CHUNKS not in retry:
            needed.discard(CHUNKS)  # extended at once, above
        queued = [b for b in [TURN_VECTORS, *available_builders()] if b in needed]
        if queued:
            QUEUE.submit(ws, namespace, queued, ctx)
    seconds = round(time.perf_counter() - start, 4)
    record = emit("remember", namespace=namespace, thread=thread, added=appended.added, sessions=appended.sessions,
                  skipped=appended.skipped, queued=queued, chunk_error=appended.chunk_error, seconds=seconds)
    if wait and queued:
        QUEUE.wait(namespace)
    return {"namespace": namespace, "added": appended.added, "sessions": appended.sessions,
            "skipped": appended.skipped, "queued": queued, "seconds": seconds, "trace": record}


def _append_failed(ws: Any, namespace: str, error: BaseException) -> None:
    set_status(ws, namespace, "remember", "failed", error=f"{type(error).__name__}: {error}"[:300],
               note="the next remember of the thread adds these turns again")


def settle(namespace: str | None = None, timeout: float | None = 30.0) -> bool:
    """Wait for this process's pending background appends (of `namespace`, or all): a recall reads after them."""
    return APPENDS.settle(namespace, timeout)


def wait_for_builds(namespace: str | None = None, timeout: float | None = None) -> bool:
    """Wait until this process's background appends and builds (of `namespace`, or all) are done; False on timeout."""
    return APPENDS.settle(namespace, timeout) and QUEUE.wait(namespace, timeout)


def create_remember_node(
    namespace: NamespaceTemplate | None = None,
    *,
    namespace_key: str = "user_id",
    messages_key: str = "messages",
    methods: Iterable[str] | None = None,
    context: Context | None = None,
    user_name: str = "User",
    assistant_name: str = "Assistant",
    background: bool = True,
) -> Callable[[Mapping[str, Any], RunnableConfig], dict[str, Any]]:
    """A LangGraph node that remembers the state's `messages` in the run's namespace; put it after the node
    that replies, so the reply never waits for it.

    `namespace` is fixed (`"alice"`) or a template filled from each run (`"{user_id}"`,
    `("memories", "{user_id}")`: recollect.scoping); without it the run's `namespace_key` names it. The run's
    `thread_id` keeps the thread's turns in their own sessions. The node hands the turns to a worker thread
    and returns at once (`background=False`: it stores them before returning); a recall in this process
    waits for them first. It changes no state key.
    """
    template = check_template(namespace if namespace is not None else "{" + namespace_key + "}")
    wanted = list(methods or ())
    _builders(wanted)  # an unknown method fails when the graph is built, not at the first turn

    def remember_node(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        remember(list(state.get(messages_key) or []), fill_namespace(template, config), thread_id=thread,
                 methods=wanted, context=context, user_name=user_name, assistant_name=assistant_name,
                 background=background)
        return {}

    remember_node.__name__ = "remember"
    return remember_node


__all__ = ["create_remember_node", "remember", "settle", "wait_for_builds"]
