"""The `ingest` graph (load a dialogue file into a namespace and build each method's memory) and
the `forget` graph (delete everything stored for a namespace).

Exposed through `langgraph.json` so Studio and the HTTP API can ingest and forget as well as ask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext, available_builders
from recollect.ingestion import ingest_conversation
from recollect.runner import forget as forget_namespace
from recollect.trace import emit


class IngestState(TypedDict):
    namespace: str
    path: str
    conversation_id: NotRequired[str | None]
    methods: NotRequired[list[str] | None]
    reports: NotRequired[list[dict[str, Any]]]
    trace: NotRequired[list[dict[str, Any]]]


def ingest(state: IngestState, runtime: Runtime[AllMethodsContext]) -> dict[str, Any]:
    conversation = load_conversation(state["path"], state.get("conversation_id"))
    methods = state.get("methods") or available_builders()
    reports = [r.as_dict() for r in ingest_conversation(conversation, state["namespace"], runtime.context, methods=methods)]
    return {"reports": reports, "trace": emit("ingest", conversation=conversation.id, methods=methods, reports=reports)}


def _one_node_graph(name: str, state: type, node: Callable[..., dict[str, Any]]) -> CompiledStateGraph:
    builder = StateGraph(state, context_schema=AllMethodsContext)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    compiled = builder.compile()
    compiled.name = name
    return compiled


graph = _one_node_graph("ingest", IngestState, ingest)


class ForgetState(TypedDict):
    namespace: str
    forgotten: NotRequired[dict[str, Any]]


def forget(state: ForgetState, runtime: Runtime[AllMethodsContext]) -> dict[str, Any]:
    return {"forgotten": forget_namespace(state["namespace"], runtime.context)}


forget_graph = _one_node_graph("forget", ForgetState, forget)
