"""Every method recollect knows, registered once by name.

The runner, ingestion, the eval, the CLI and the server look methods up here. Each method's contract is one
typed `MethodSpec` in its folder's `spec.py` (`recollect.graphs.spec`): its graph, the context class that is
its LangGraph `context_schema`, the memory builder whose structures it reads, its step limit, its own eval
columns and auxiliary-model nodes. Specs name code by `Ref`, imported on first use, so asking one method never
imports another's graph. Adding a method: its folder with a `spec.py`, and one line in `SPECS` below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recollect.graphs.baselines.settings import BaselineSettings
from recollect.graphs.baselines.spec import FULL_CONTEXT, RAG
from recollect.graphs.hymem.settings import HyMemSettings
from recollect.graphs.hymem.spec import SPEC as HYMEM
from recollect.graphs.memr3.settings import MemR3Settings
from recollect.graphs.memr3.spec import SPEC as MEMR3
from recollect.graphs.mgretrieval.settings import MGRetrievalSettings
from recollect.graphs.mgretrieval.spec import SPEC as MGRETRIEVAL
from recollect.graphs.mragent.settings import MRAgentSettings
from recollect.graphs.mragent.spec import SPEC as MRAGENT
from recollect.graphs.spec import BuildMemory, MemorySpec, MethodSpec
from recollect.memory.chunks import ChunkSettings
from recollect.settings import Context

SPECS: tuple[MethodSpec, ...] = (MEMR3, RAG, FULL_CONTEXT, MRAGENT, HYMEM, MGRETRIEVAL)

METHODS: dict[str, MethodSpec] = {s.name: s for s in SPECS}
# Memory builders by name (several methods may read one: rag reads MemR3's chunks).
BUILDERS: dict[str, MemorySpec] = {s.memory.name: s.memory for s in SPECS if s.memory is not None}
GRAPH_NEEDS: dict[str, str | None] = {name: s.memory_name for name, s in METHODS.items()}


@dataclass(kw_only=True)
class AllMethodsContext(MemR3Settings, ChunkSettings, BaselineSettings, MRAgentSettings, HyMemSettings,
                        MGRetrievalSettings, Context):
    """The shared settings plus every method's: what the CLI, ingestion and the eval carry.

    A run narrows it to the graph's own context (`Context.narrow`), so each graph sees only its settings.
    """

def spec(name: str) -> MethodSpec:
    """Method `name`'s contract; a ValueError naming the known methods for any other name."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r} (choose from: {', '.join(METHODS)})")
    return METHODS[name]


def available_methods() -> list[str]:
    return [name for name, s in METHODS.items() if s.graph.available()]


def load_graph(name: str) -> Any:
    try:
        return spec(name).graph.load()
    except ModuleNotFoundError as exc:
        raise ValueError(f"method {name!r} is not available in this installation: {exc}") from exc


def context_class(name: str) -> type[Context]:
    return spec(name).context


def method_context(name: str, ctx: Context) -> Context:
    """`ctx` as method `name`'s own context: its settings, nothing of other methods."""
    cls = context_class(name)
    return ctx if type(ctx) is cls else ctx.narrow(cls)


def step_limit(name: str, ctx: Context) -> int:
    """The run's LangGraph recursion limit for these settings (the spec's `step_limit`)."""
    return spec(name).step_limit.load()(method_context(name, ctx))


def missing_memory(name: str, built: Mapping[str, Any], sessions: int) -> tuple[str, int | None] | None:
    """What method `name` lacks in a namespace of `sessions` sessions whose builders stamped `built`
    (`NamespaceInfo.built`): None when its builder's memory covers every session, else (the builder,
    how many sessions it covers; None when it never ran)."""
    builder = spec(name).memory_name
    if builder is None:
        return None
    stamp = built.get(builder)
    if stamp is None:
        return builder, None
    covered = int(stamp.get("sessions", sessions)) if isinstance(stamp, Mapping) else sessions
    return (builder, covered) if covered < sessions else None


def available_builders() -> list[str]:
    return [name for name, memory in BUILDERS.items() if memory.build.available()]


def load_builder(name: str) -> BuildMemory:
    if name not in BUILDERS:
        raise ValueError(f"unknown method {name!r} (known: {', '.join(BUILDERS)})")
    return BUILDERS[name].build.load()


def aux_llm_nodes() -> frozenset[str]:
    """Nodes whose calls go to the auxiliary model (MGRetrieval's keyword selection), from every method."""
    return frozenset().union(*(s.aux_llm_nodes for s in SPECS))


def memory_turn_ids(name: str, ws: Any, namespace: str, ctx: Context) -> set[str]:
    """Turns method `name`'s built memory can reach at all (the eval's `evidence_in_memory`): its
    memory's `reach`; a method with no memory of its own reaches every stored turn."""
    memory = spec(name).memory
    if memory is None:
        return set(ws.turns(namespace))
    return set(memory.reach.load()(ws, namespace, ctx))


def method_eval_fields(name: str, state: dict[str, Any]) -> dict[str, Any]:
    """A method's own eval columns from its final state (its spec's `eval_fields`), else {}."""
    fields_of = spec(name).eval_fields
    return dict(fields_of.load()(state)) if fields_of is not None and state else {}
