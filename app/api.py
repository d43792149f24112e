"""The public API, re-exported by `recollect` itself: build a graph, ingest a dialogue, ask, forget.

```python
from recollect import ask, create_graph, ingest

ingest("dialogue.json", namespace="alice")              # every method's memory, once
graph = create_graph("memr3")                           # a compiled LangGraph, bound to its settings
graph.invoke({"namespace": "alice", "question": "Where does Maya work?"})["answer"]
ask("Where does Maya work?", namespace="alice", method="hymem")["answer"]
```

Settings come from a method's context class (`MemR3Context`, ...), keyword settings (`memr3_top_k=8`) or
`AllMethodsContext`; `RECOLLECT_*` environment variables give the defaults.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from langchain_core.runnables import Runnable

from recollect.dialogue.loaders import load_conversation
from recollect.dialogue.models import Conversation
from recollect.graphs.registry import (
    AllMethodsContext,
    BaselineSettings,
    ChunkSettings,
    MemR3Settings,
    context_class,
    load_graph,
)
from recollect.memory.build import BuildReport
from recollect.memory.workspace import validate_namespace
from recollect.settings import Context


def _context(cls: type[Context], context: Context | None, settings: dict[str, Any]) -> Context:
    """`context` (default: `cls`'s defaults) with keyword `settings` applied, as `cls`.

    A setting `cls` does not have is an error (`ContextError`) unless `context` carries it.
    """
    base = context if context is not None else cls()
    if settings:
        base = base.with_overrides(**settings)
    return base if type(base) is cls else base.narrow(cls)


# The methods that read snippets from a retriever; the others build and search memories of their own.
_STORE_METHODS = ("memr3", "rag")


def _with_vector_store(method: str, ctx: Context, vector_store: Any) -> Context:
    """`ctx` reading `vector_store` as its retriever, k documents a query by the method's own setting."""
    from langchain_core.vectorstores import VectorStore

    if method not in _STORE_METHODS:
        raise ValueError(f"method {method!r} cannot use vector_store=: it builds and searches its own memory "
                         f"(only {' and '.join(_STORE_METHODS)} read a vector store)")
    if not isinstance(vector_store, VectorStore):
        raise ValueError(f"vector_store must be a langchain_core VectorStore, got {type(vector_store).__name__}")
    if ctx.retriever is not None:
        raise ValueError("give either retriever= or vector_store=, not both")
    # MemR3 drops documents it has already shown after the call, so a query asks for its candidate pool
    # (what its own chunk search ranks), not just the snippets it shows, or a second retrieval finds nothing new.
    # ctx is the method's own context (context_class): BaselineContext for rag, MemR3Context for memr3.
    if method == "rag" and isinstance(ctx, BaselineSettings):
        k = ctx.rag_top_k
    elif method == "memr3" and isinstance(ctx, MemR3Settings) and isinstance(ctx, ChunkSettings):
        k = max(ctx.memr3_candidate_k, ctx.memr3_top_k)
    else:
        raise TypeError(f"{type(ctx).__name__} is not method {method!r}'s context")
    return ctx.with_overrides(retriever=vector_store.as_retriever(search_kwargs={"k": k}))


def _add_turns(vector_store: Any, conversation: Conversation, namespace: str) -> BuildReport:
    """Every turn as a Document with its turn id as id, so the graphs cite it; returns what was added."""
    from langchain_core.documents import Document

    start = time.monotonic()
    docs = [Document(page_content=t.render(), id=t.id,
                     metadata={"id": t.id, "turn_id": t.id, "speaker": t.speaker, "date_time": t.date_time,
                               "session": t.session, "namespace": namespace})
            for t in conversation.turns]
    vector_store.add_documents(docs, ids=[d.id for d in docs])
    return BuildReport("vector_store", sessions=len(conversation.sessions), embedded=len(docs),
                       seconds=round(time.monotonic() - start, 3))


def create_graph(
    method: str = "memr3",
    *,
    checkpointer: Any = None,
    store: Any = None,
    retriever: Any = None,
    vector_store: Any = None,
    chat_model: Any = None,
    context: Context | None = None,
    **settings: Any,
) -> Runnable:
    """Method `method`'s graph, compiled with `checkpointer`/`store` and bound to its settings.

    The result is a LangChain Runnable: `invoke`, `stream`, `batch`, `as_tool`, LCEL, and
    `get_state`/`get_graph` reach the compiled graph. A run may still pass `context=` to override the
    bound settings. `retriever` (memr3, rag) is any LangChain retriever whose documents carry stable
    ids; `vector_store` (memr3, rag) is a LangChain `VectorStore` read through its `as_retriever`, its
    documents with the same ids (what `ingest(..., vector_store=)` adds); `chat_model` replaces the
    configured endpoint; other keywords are settings (`memr3_top_k=8`).
    """
    cls = context_class(method)
    python_only = {k: v for k, v in (("retriever", retriever), ("chat_model", chat_model)) if v is not None}
    ctx = _context(cls, context, {**settings, **python_only})
    if vector_store is not None:
        ctx = _with_vector_store(method, ctx, vector_store)
    if store is None and ctx.retriever is None:  # the data directory's store, where `ingest` wrote the memories
        from recollect.runner import memory_store

        store = memory_store(ctx.data_dir)
    compiled = load_graph(method).builder.compile(checkpointer=checkpointer, store=store, name=method)
    return compiled.bind(context=ctx)


def create_memr3_graph(**kwargs: Any) -> Runnable:
    """MemR3: the retrieve / reflect / answer controller with an evidence–gap tracker (see `create_graph`)."""
    return create_graph("memr3", **kwargs)


def create_mragent_graph(**kwargs: Any) -> Runnable:
    """MRAgent: the Cue–Tag–Content memory and a tool-using reconstructing agent (see `create_graph`)."""
    return create_graph("mragent", **kwargs)


def create_hymem_graph(**kwargs: Any) -> Runnable:
    """HyMem: Level-1 summaries over Level-2 sessions, light -> deep -> reflect (see `create_graph`)."""
    return create_graph("hymem", **kwargs)


def create_mgretrieval_graph(**kwargs: Any) -> Runnable:
    """MGRetrieval: the keyword vocabulary and the memory-guided retrieval pyramid (see `create_graph`)."""
    return create_graph("mgretrieval", **kwargs)


def create_rag_graph(**kwargs: Any) -> Runnable:
    """The one-shot RAG baseline: top-k chunks, then one answer call (see `create_graph`)."""
    return create_graph("rag", **kwargs)


def create_full_context_graph(**kwargs: Any) -> Runnable:
    """The full-context baseline: the newest turns that fit, then one answer call (see `create_graph`)."""
    return create_graph("full_context", **kwargs)


def load_dialogue(source: str | Path, conversation_id: str | None = None) -> Conversation:
    """A dialogue file (LoCoMo JSON or the simple format) as a `Conversation`; bad files raise a clear error."""
    return load_conversation(source, conversation_id)


def ingest(
    dialogue: str | Path | Conversation,
    namespace: str,
    *,
    methods: Iterable[str] | None = None,
    conversation_id: str | None = None,
    context: Context | None = None,
    show_progress: bool = False,
    vector_store: Any = None,
    **settings: Any,
) -> list[BuildReport]:
    """Store a dialogue in `namespace` and build each method's memory (all of them by default).

    Idempotent and incremental: ingesting the same dialogue again makes no LLM call; new sessions
    extend what is there. With `vector_store` (a LangChain `VectorStore`), the turns are added to that
    store instead, one Document per turn (id = the turn id; metadata id, turn_id, speaker, date_time,
    session, namespace), and only the `methods` named are built besides.
    """
    from recollect.ingestion import ingest_conversation

    conversation = dialogue if isinstance(dialogue, Conversation) else load_conversation(dialogue, conversation_id)
    ctx = _context(AllMethodsContext, context, settings)
    reports = []
    if vector_store is not None:
        validate_namespace(namespace)
        reports.append(_add_turns(vector_store, conversation, namespace))
        if not methods:
            return reports
    return reports + ingest_conversation(conversation, namespace, ctx, methods=list(methods) if methods else None,
                                         show_progress=show_progress)


def ask(
    question: str,
    namespace: str,
    method: str = "memr3",
    *,
    context: Context | None = None,
    checkpointer: Any = None,
    thread_id: str | None = None,
    vector_store: Any = None,
    **settings: Any,
) -> dict[str, Any]:
    """Answer `question` from `namespace` with `method`: the final state (`answer`, `supports`, `trace`...).

    With a checkpointer, `thread_id` names a conversation that a later question continues. `vector_store`
    (memr3, rag): read the snippets from that LangChain `VectorStore`, as `create_graph` does.
    """
    from recollect.runner import ask as run_ask

    ctx = _context(context_class(method), context, settings)
    if vector_store is not None:
        ctx = _with_vector_store(method, ctx, vector_store)
    return run_ask(namespace, question, method, ctx, checkpointer=checkpointer, thread_id=thread_id)


def forget(namespace: str, *, context: Context | None = None, **settings: Any) -> dict[str, Any]:
    """Delete everything stored for `namespace` (memories, caches, vectors, its threads). Idempotent."""
    from recollect.runner import forget as run_forget

    return run_forget(namespace, _context(Context, context, settings))


def create_retriever(namespace: str | None = None, *, method: str | None = None, k: int = 5,
                     namespace_key: str = "user_id", context: Context | None = None) -> Any:
    """A namespace's memory as a LangChain `BaseRetriever` (see `recollect.recall.RecollectRetriever`)."""
    from recollect.recall import RecollectRetriever

    if method is not None:
        context_class(method)  # an unknown method fails here, not at the first query
    return RecollectRetriever(namespace=namespace, method=method, k=k, namespace_key=namespace_key,
                              context=context)


__all__ = [
    "ask",
    "create_full_context_graph",
    "create_graph",
    "create_hymem_graph",
    "create_memr3_graph",
    "create_mgretrieval_graph",
    "create_mragent_graph",
    "create_rag_graph",
    "create_retriever",
    "forget",
    "ingest",
    "load_dialogue",
]
