"""Every method recollect knows, registered once by name.

The runner, ingestion, the eval, the CLI and the server look methods up here; each entry names its
graph, the context class that is its LangGraph `context_schema`, the memory builder whose structures
it reads, and how many graph steps a run may take. Targets are "module:attribute" strings, imported
on first use, so asking one method never imports another's code.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recollect.graphs.baselines.settings import BaselineSettings
from recollect.graphs.hymem.settings import HyMemSettings
from recollect.graphs.memr3.settings import MemR3Settings
from recollect.graphs.mgretrieval.settings import MGRetrievalSettings
from recollect.graphs.mragent.settings import MRAgentSettings
from recollect.memory.chunks import ChunkSettings
from recollect.settings import Context


@dataclass(frozen=True)
class Method:
    graph: str  # "module:attribute" of the compiled graph
    context: str  # "module:Class" of its context schema
    memory: str | None  # the builder (a key of BUILDERS) whose memory it reads; None = the turns alone


METHODS: dict[str, Method] = {
    "memr3": Method("recollect.graphs.memr3.graph:graph", "recollect.graphs.memr3.settings:MemR3Context", "memr3"),
    "rag": Method("recollect.graphs.baselines.graph:rag", "recollect.graphs.baselines.settings:BaselineContext",
                  "memr3"),
    "full_context": Method("recollect.graphs.baselines.graph:full_context",
                           "recollect.graphs.baselines.settings:BaselineContext", None),
    "mragent": Method("recollect.graphs.mragent.graph:graph", "recollect.graphs.mragent.settings:MRAgentContext",
                      "mragent"),
    "hymem": Method("recollect.graphs.hymem.graph:graph", "recollect.graphs.hymem.settings:HyMemContext", "hymem"),
    "mgretrieval": Method("recollect.graphs.mgretrieval.graph:graph",
                          "recollect.graphs.mgretrieval.settings:MGRetrievalContext", "mgretrieval"),
}

# Memory builders by name: build(ws, namespace, conversation, ctx, progress) -> BuildReport.
BUILDERS: dict[str, str] = {
    "memr3": "recollect.memory.chunks:build_memr3_chunks",
    "mragent": "recollect.graphs.mragent.memory:build",
    "hymem": "recollect.graphs.hymem.memory:build",
    "mgretrieval": "recollect.graphs.mgretrieval.memory:build",
}
GRAPH_NEEDS: dict[str, str | None] = {name: m.memory for name, m in METHODS.items()}


@dataclass(kw_only=True)
class AllMethodsContext(MemR3Settings, ChunkSettings, BaselineSettings, MRAgentSettings, HyMemSettings,
                        MGRetrievalSettings, Context):
    """The shared settings plus every method's: what the CLI, ingestion and the eval carry.

    A run narrows it to the graph's own context (`Context.narrow`), so each graph sees only its settings.
    """


def _resolve(target: str) -> Any:
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def _known(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r} (choose from: {', '.join(METHODS)})")
    return METHODS[name]


def available_methods() -> list[str]:
    return [m for m, entry in METHODS.items() if importlib.util.find_spec(entry.graph.split(":")[0]) is not None]


def load_graph(name: str) -> Any:
    try:
        return _resolve(_known(name).graph)
    except ModuleNotFoundError as exc:
        raise ValueError(f"method {name!r} is not available in this installation: {exc}") from exc


def context_class(name: str) -> type[Context]:
    return _resolve(_known(name).context)


def method_context(name: str, ctx: Context) -> Context:
    """`ctx` as method `name`'s own context: its settings, nothing of other methods."""
    cls = context_class(name)
    return ctx if type(ctx) is cls else ctx.narrow(cls)


def step_limit(name: str, ctx: Context) -> int:
    """The run's LangGraph recursion limit: the graph module's `recursion_limit(ctx)` for these settings."""
    module = importlib.import_module(_known(name).graph.split(":")[0])
    return module.recursion_limit(method_context(name, ctx))


def missing_memory(name: str, built: Mapping[str, Any], sessions: int) -> tuple[str, int | None] | None:
    """What method `name` lacks in a namespace of `sessions` sessions whose builders stamped `built`
    (`NamespaceInfo.built`): None when its builder's memory covers every session, else (the builder,
    how many sessions it covers; None when it never ran)."""
    builder = _known(name).memory
    if builder is None:
        return None
    stamp = built.get(builder)
    if stamp is None:
        return builder, None
    covered = int(stamp.get("sessions", sessions)) if isinstance(stamp, Mapping) else sessions
    return (builder, covered) if covered < sessions else None


def available_builders() -> list[str]:
    return [name for name, target in BUILDERS.items() if importlib.util.find_spec(target.split(":")[0]) is not None]


def load_builder(name: str) -> Callable[..., Any]:
    if name not in BUILDERS:
        raise ValueError(f"unknown method {name!r} (known: {', '.join(BUILDERS)})")
    return _resolve(BUILDERS[name])


def _graph_modules() -> list[Any]:
    return [importlib.import_module(METHODS[m].graph.split(":")[0]) for m in available_methods()]


def aux_llm_nodes() -> frozenset[str]:
    """Nodes whose calls go to the auxiliary model (MGRetrieval's keyword selection), from every method."""
    return frozenset().union(*(getattr(m, "AUX_LLM_NODES", frozenset()) for m in _graph_modules()))


def memory_turn_ids(name: str, ws: Any, namespace: str, ctx: Context) -> set[str]:
    """Turns method `name`'s built memory can reach at all (the eval's `evidence_in_memory`): its
    builder module's `turn_ids_in_memory`; a method with no memory of its own reaches every stored turn."""
    builder = _known(name).memory
    if builder is None:
        return set(ws.turns(namespace))
    module = importlib.import_module(BUILDERS[builder].split(":")[0])
    return set(module.turn_ids_in_memory(ws, namespace, ctx))


def method_eval_fields(name: str, state: dict[str, Any]) -> dict[str, Any]:
    """A method's own eval columns from its final state (its graph module's `eval_fields`), else {}."""
    module = importlib.import_module(_known(name).graph.split(":")[0])
    fields_of = getattr(module, "eval_fields", None)
    return dict(fields_of(state)) if fields_of is not None and state else {}
