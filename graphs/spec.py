"""One typed contract per method: what the runner, ingestion, the eval and the server need to know of it.

Each method folder has a `spec.py` holding its `MethodSpec` (baselines: one per baseline graph) and, where the
method builds a memory of its own, its `MemorySpec`. The chunk memory, which MemR3 and rag both read, is shared
code (`recollect.memory.chunks`), so its spec is `CHUNKS` below. `recollect.graphs.registry` lists the specs.

A spec names code by `Ref` ("module:attribute", imported on first use) so that naming a method, listing them
or reading their settings never imports a graph and its dependencies. The spec lives beside `__init__.py`, not
in it: a package's `__init__` runs on every import of its modules, so a spec there would import the settings
machinery into every node module, and it is part of each graph's fingerprint (`recollect.eval.fingerprint`)
while the spec only names what the fingerprint already follows.

    from recollect.graphs.registry import spec
    s = spec("memr3")
    s.graph.load()            # the compiled graph
    s.context                 # MemR3Context, its LangGraph context_schema
    s.memory.name             # "memr3": the builder whose memory it reads
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from recollect.settings import Context

T = TypeVar("T")

# A memory builder: build(workspace, namespace, conversation, ctx, progress) -> BuildReport
# (recollect.memory.build documents the contract).
BuildMemory = Callable[..., Any]
# The turn ids a built memory can reach at all, the eval's `evidence_in_memory`: reach(workspace, namespace, ctx).
MemoryReach = Callable[..., set[str]]
# The LangGraph recursion limit of one run with these settings.
StepLimit = Callable[[Any], int]
# A method's own eval columns from its final state.
EvalFields = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Ref(Generic[T]):
    """`module:attribute`, imported on first use; `T` is what the attribute is."""

    target: str

    def __post_init__(self) -> None:
        module, sep, attr = self.target.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"a Ref names 'module:attribute', got {self.target!r}")

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def available(self) -> bool:
        """Whether the module is installed (an optional dependency missing removes only its method)."""
        try:
            return importlib.util.find_spec(self.module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            return False

    def load(self) -> T:
        module, _, attr = self.target.partition(":")
        return cast(T, getattr(importlib.import_module(module), attr))


@dataclass(frozen=True)
class MemorySpec:
    """A memory builder: what ingestion runs for a namespace and what the eval asks of the memory it made."""

    name: str
    build: Ref[BuildMemory]
    reach: Ref[MemoryReach]


@dataclass(frozen=True)
class MethodSpec:
    """A method as the rest of recollect sees it."""

    name: str
    graph: Ref[Any]  # the compiled LangGraph
    context: type[Context]  # its context_schema: the shared settings plus the method's own
    memory: MemorySpec | None  # the builder whose memory it reads; None = the stored turns alone
    step_limit: Ref[StepLimit]
    eval_fields: Ref[EvalFields] | None = None
    # nodes whose model calls go to the auxiliary model; the eval reports their usage apart
    aux_llm_nodes: frozenset[str] = field(default_factory=frozenset)

    @property
    def memory_name(self) -> str | None:
        return self.memory.name if self.memory is not None else None


def folder_memory(name: str, folder: str) -> MemorySpec:
    """A memory built by `recollect.graphs.<folder>.memory`: `build` and `turn_ids_in_memory`, the names every
    method folder with a builder uses."""
    module = f"recollect.graphs.{folder}.memory"
    return MemorySpec(name=name, build=Ref(f"{module}:build"), reach=Ref(f"{module}:turn_ids_in_memory"))


def folder_method(name: str, folder: str, context: type[Context], memory: MemorySpec | None, *,
                  graph: str = "graph", with_eval_fields: bool = False,
                  aux_llm_nodes: frozenset[str] = frozenset()) -> MethodSpec:
    """A method whose graph is `recollect.graphs.<folder>.graph`: the compiled `graph` (or the attribute named),
    `recursion_limit` and, `with_eval_fields`, `eval_fields`, the names every method folder's graph.py uses."""
    module = f"recollect.graphs.{folder}.graph"
    return MethodSpec(name=name, graph=Ref(f"{module}:{graph}"), context=context, memory=memory,
                      step_limit=Ref(f"{module}:recursion_limit"),
                      eval_fields=Ref(f"{module}:eval_fields") if with_eval_fields else None,
                      aux_llm_nodes=aux_llm_nodes)


# Chunks of consecutive turns with their vectors (no model call), read by MemR3 and rag; named "memr3" after
# the method it was built for (stamps and eval caches carry the name).
CHUNKS = MemorySpec(
    name="memr3",
    build=Ref("recollect.memory.chunks:build_memr3_chunks"),
    reach=Ref("recollect.memory.chunks:turn_ids_in_memory"),
)
