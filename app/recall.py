"""recollect inside a LangChain app: a `recall` tool and a `BaseRetriever`, scoped by the app.

The namespace (whose memory is read) is never a tool argument: the model only writes the
question. The app fixes the namespace when it builds the tool, or names a key that each run's
`config["configurable"]` (or the LangGraph runtime context of the agent calling the tool) carries,
e.g. `user_id`. So one user's agent cannot be talked into reading another user's memory.

    tool = create_recall_tool(method="memr3", namespace_key="user_id")
    agent = create_agent(model, tools=[tool])
    agent.invoke({"messages": [...]}, {"configurable": {"user_id": "alice"}})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, run_in_executor
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from recollect.graphs.registry import AllMethodsContext
from recollect.memory.workspace import NamespaceError, validate_namespace

RECALL_DESCRIPTION = (
    "Answer a question from the long-term memory of past conversations with this user. "
    "Returns a short answer and the ids of the conversation turns it rests on."
)


class RecallInput(BaseModel):
    """The only argument the model writes: the question."""

    question: str = Field(description="a self-contained question about the past conversations")


def scoped_namespace(fixed: str | None, key: str, config: RunnableConfig | None) -> str:
    """The namespace a run may read: `fixed`, else `configurable[key]`, else the runtime context's `key`."""
    namespace = fixed
    if namespace is None:
        configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
        namespace = configurable.get(key)
    if namespace is None:
        namespace = _runtime_context_value(key)
    if not namespace:
        raise NamespaceError(f"no namespace: build the tool with namespace=..., or pass {key!r} in the run's "
                             "config['configurable'] or context")
    return validate_namespace(str(namespace))


def _runtime_context_value(key: str) -> Any:
    """`key` of the LangGraph runtime context when called from inside a graph (e.g. an agent's tool node)."""
    try:
        from langgraph.runtime import get_runtime

        runtime = get_runtime()
    except (ImportError, RuntimeError):
        return None
    context = getattr(runtime, "context", None)
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def create_recall_tool(
    method: str = "memr3",
    *,
    namespace: str | None = None,
    namespace_key: str = "user_id",
    context: AllMethodsContext | None = None,
    name: str = "recall",
    description: str = RECALL_DESCRIPTION,
) -> BaseTool:
    """A LangChain tool that answers a question from one namespace's memory with `method`.

    `namespace` fixes the namespace; otherwise each call reads `namespace_key` from the run's config
    or runtime context. `context` carries recollect's settings (data_dir, an injected chat model...).
    The tool returns `{"answer", "supports"}` only, so the calling model's context stays small.
    """
    if namespace is not None:
        validate_namespace(namespace)

    def recall(question: str, config: RunnableConfig) -> dict[str, Any]:
        from recollect.runner import ask

        scoped = scoped_namespace(namespace, namespace_key, config)
        result = ask(scoped, question, method, context or AllMethodsContext())
        return {"answer": result.get("answer", ""), "supports": list(result.get("supports") or [])}

    return StructuredTool.from_function(func=recall, name=name, description=description, args_schema=RecallInput)


class RecollectRetriever(BaseRetriever):
    """A namespace's memory as a LangChain retriever.

    With `method=None` (default) it returns the top `k` MemR3 chunks for the query (hybrid dense +
    BM25, no LLM call); with a method name it runs that method and returns its critical memories.
    Documents carry `id` (chunk or turn id) and `metadata` with `turn_ids`, `namespace` and dates.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    namespace: str | None = None
    namespace_key: str = "user_id"
    method: str | None = None
    k: int = 5
    context: Any = None

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:  # noqa: A002
        kwargs["namespace"] = scoped_namespace(self.namespace, self.namespace_key, config)
        return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:  # noqa: A002
        # Resolved here, on the caller's task, where the run's config and LangGraph runtime are visible.
        kwargs["namespace"] = scoped_namespace(self.namespace, self.namespace_key, config)
        return await super().ainvoke(input, config, **kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, namespace: str | None = None
    ) -> list[Document]:
        # The stores and graphs are synchronous: run them in a worker thread so the event loop stays free.
        # (BaseRetriever's default forwards no keyword arguments, so `ainvoke` failed on `namespace`.)
        return await run_in_executor(None, self._get_relevant_documents, query,
                                     run_manager=run_manager.get_sync(), namespace=namespace)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, namespace: str | None = None
    ) -> list[Document]:
        ns = namespace or scoped_namespace(self.namespace, self.namespace_key, None)
        ctx = self.context or AllMethodsContext()
        if self.method is None:
            from recollect.steps import snippet_source

            units = snippet_source(ctx, ns).retrieve(query, [], self.k)
            return [Document(id=u.id, page_content=u.text,
                             metadata={**u.metadata, "turn_ids": list(u.turn_ids), "namespace": ns}) for u in units]
        from recollect.runner import ask

        result = ask(ns, query, self.method, ctx)
        return [Document(id=m["id"], page_content=m["text"],
                         metadata={"turn_ids": [m["id"]], "namespace": ns, "date_time": m.get("date_time"),
                                   "answer": result.get("answer")})
                for m in (result.get("critical_memories") or [])[: self.k]]
