"""recollect: published memory-retrieval methods (MemR3, MRAgent, HyMem, MGRetrieval) as LangGraph graphs.

The public API, imported lazily so that `import recollect.settings` (or a subprocess such as the
model server's guard) does not load LangGraph and every method:

    from recollect import create_graph, ingest, ask, forget, remember, create_recall_tool, MemR3Context

Build a graph with `create_graph(method, checkpointer=..., store=..., retriever=...)` or the per-method
`create_memr3_graph`, ...; `ingest` a dialogue file into a namespace; `ask` a question; `forget` a
namespace; `remember` a running chat's newest turns (or add `create_remember_node(...)` to an agent's
graph); give an agent `create_recall_tool(...)`, `create_recall_node(...)` or a chain `create_retriever(...)`.
Settings types:
`Context` (shared), one per method (`MemR3Context`, `MRAgentContext`, `HyMemContext`,
`MGRetrievalContext`, `BaselineContext`) and `AllMethodsContext`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # graphs
    "create_graph": "recollect.api",
    "create_memr3_graph": "recollect.api",
    "create_mragent_graph": "recollect.api",
    "create_hymem_graph": "recollect.api",
    "create_mgretrieval_graph": "recollect.api",
    "create_rag_graph": "recollect.api",
    "create_full_context_graph": "recollect.api",
    "available_methods": "recollect.graphs.registry",
    # memory
    "load_dialogue": "recollect.api",
    "ingest": "recollect.api",
    "ask": "recollect.api",
    "forget": "recollect.api",
    # an agent's memory
    "remember": "recollect.agent_memory",
    "create_remember_node": "recollect.agent_memory",
    "wait_for_builds": "recollect.agent_memory",
    # LangChain
    "create_recall_tool": "recollect.recall",
    "create_recall_node": "recollect.recall",
    "create_retriever": "recollect.api",
    "RecollectRetriever": "recollect.recall",
    # settings
    "Context": "recollect.settings",
    "ContextError": "recollect.settings",
    "AllMethodsContext": "recollect.graphs.registry",
    "MemR3Context": "recollect.graphs.memr3.settings",
    "MRAgentContext": "recollect.graphs.mragent.settings",
    "HyMemContext": "recollect.graphs.hymem.settings",
    "MGRetrievalContext": "recollect.graphs.mgretrieval.settings",
    "BaselineContext": "recollect.graphs.baselines.settings",
    # dialogue types
    "Conversation": "recollect.dialogue.models",
    "Session": "recollect.dialogue.models",
    "Turn": "recollect.dialogue.models",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'recollect' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
