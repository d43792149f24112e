"""recollect inside a LangChain app: a `recall` tool, a recall node and a `BaseRetriever`, scoped by the app.

The namespace (whose memory is read) is never a tool argument: the model only writes the question. The app
fixes the namespace when it builds the tool, or gives a template filled from each run's
`config["configurable"]` (or the LangGraph runtime context of the agent calling it), e.g. `"{user_id}"`
(recollect.scoping). So one user's agent cannot be talked into reading another user's memory.

```python
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent      # or langchain's create_agent
from recollect import create_recall_tool, ingest

ingest("dialogue.json", namespace="alice", methods=["memr3"])
tool = create_recall_tool(method="memr3", namespace="{user_id}")
agent = create_react_agent(ChatOpenAI(model="gpt-4o-mini"), tools=[tool])
agent.invoke({"messages": [("user", "What is my dog called?")]}, {"configurable": {"user_id": "alice"}})
```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, run_in_executor
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from recollect.agent_memory.appends import APPENDS
from recollect.graphs.registry import AllMethodsContext
from recollect.memory.workspace import open_workspace
from recollect.scoping import NamespaceTemplate, check_template, fill_namespace

RECALL_DESCRIPTION = (
    "Answer a question from the long-term memory of past conversations with this user. "
    "Returns a short answer and the ids of the conversation turns it rests on."
)


class RecallInput(BaseModel):
    """The only argument the model writes: the question."""

    question: str = Field(description="a self-contained question about the past conversations")


def _template(namespace: NamespaceTemplate | None, key: str) -> NamespaceTemplate:
    """The namespace template of a tool, node or retriever: `namespace`, else the run value `key` alone."""
    return check_template(namespace if namespace is not None else "{" + key + "}")


def scoped_namespace(namespace: NamespaceTemplate | None, key: str, config: RunnableConfig | None) -> str:
    """The namespace a run may read: `namespace` (fixed or a template, recollect.scoping) filled from the run,
    else the run's `key` (`configurable[key]`, else the runtime context's)."""
    return fill_namespace(_template(namespace, key), config)


def create_recall_tool(
    method: str = "memr3",
    *,
    namespace: NamespaceTemplate | None = None,
    namespace_key: str = "user_id",
    context: AllMethodsContext | None = None,
    name: str = "recall",
    description: str = RECALL_DESCRIPTION,
) -> BaseTool:
    """A LangChain tool that answers a question from one namespace's memory with `method`.

    `namespace` fixes the namespace (`"alice"`) or is a template filled from each call's run (`"{user_id}"`,
    `("memories", "{user_id}")`); without it each call reads `namespace_key` from the run's config or runtime
    context. `context` carries recollect's settings (data_dir, an injected chat model...). The tool returns
    `{"answer", "supports"}` only, so the calling model's context stays small.
    """
    template = _template(namespace, namespace_key)

    def recall(question: str, config: RunnableConfig) -> dict[str, Any]:
        from recollect.runner import ask

        result = ask(fill_namespace(template, config), question, method, context or AllMethodsContext())
        return {"answer": result.get("answer", ""), "supports": list(result.get("supports") or [])}

    return StructuredTool.from_function(func=recall, name=name, description=description, args_schema=RecallInput)


def _last_human_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) or (isinstance(message, Mapping) and message.get("role") in ("user", "human")):
            content = message.content if isinstance(message, HumanMessage) else message.get("content")
            return (content if isinstance(content, str) else " ".join(
                p.get("text", "") if isinstance(p, dict) else str(p) for p in content or [])).strip()
    return ""


def create_recall_node(
    method: str | None = None,
    *,
    namespace: NamespaceTemplate | None = None,
    namespace_key: str = "user_id",
    k: int = 5,
    messages_key: str = "messages",
    output_key: str = "recall",
    context: AllMethodsContext | None = None,
) -> Callable[[Mapping[str, Any], RunnableConfig], dict[str, Any]]:
    """A LangGraph node that recalls what the namespace's memory holds about the last human message.

    It writes `{output_key: {"query", "memories", "answer", "supports"}}`: with `method=None` (default) the
    top `k` remembered snippets (no model call: hybrid dense + BM25 over MemR3's chunks); with a method name
    that method's answer, its supports and the memories it rests on. The namespace comes from the app as in
    `create_recall_tool`; a namespace nothing was remembered in yet recalls nothing (no error), so an agent's
    first turn with a new user just works.
    """
    template = _template(namespace, namespace_key)
    ctx = context or AllMethodsContext()

    def recall(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        query = _last_human_text(list(state.get(messages_key) or []))
        out: dict[str, Any] = {"query": query, "memories": [], "answer": "", "supports": []}
        ns = fill_namespace(template, config)
        APPENDS.settle(ns)  # what a remember node of this process handed off is read too
        if not query or open_workspace(ctx.data_dir).namespace_info(ns) is None:
            return {output_key: out}
        if method is None:
            docs = RecollectRetriever(namespace=ns, k=k, context=ctx)._get_relevant_documents(
                query, run_manager=CallbackManagerForRetrieverRun.get_noop_manager(), namespace=ns)
            out["memories"] = [{"id": d.id, "text": d.page_content, "turn_ids": d.metadata["turn_ids"]} for d in docs]
            return {output_key: out}
        from recollect.runner import ask

        result = ask(ns, query, method, ctx)
        out.update(answer=result.get("answer", ""), supports=list(result.get("supports") or []),
                   memories=[{"id": m["id"], "text": m["text"], "turn_ids": [m["id"]]}
                             for m in (result.get("critical_memories") or [])[:k]])
        return {output_key: out}

    recall.__name__ = "recall"
    return recall


class RecollectRetriever(BaseRetriever):
    """A namespace's memory as a LangChain retriever.

    With `method=None` (default) it returns the top `k` MemR3 chunks for the query (hybrid dense +
    BM25, no LLM call); with a method name it runs that method and returns its critical memories.
    Documents carry `id` (chunk or turn id) and `metadata` with `turn_ids`, `namespace` and dates.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    namespace: NamespaceTemplate | None = None
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
        APPENDS.settle(ns)  # what a remember node of this process handed off is read too
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
