"""HyMem's contract with the rest of recollect (`recollect.graphs.spec`)."""

from __future__ import annotations

from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.spec import MemorySpec, MethodSpec, Ref

# Level-1 summary items linked to their turns, and the raw sessions (Level 2).
MEMORY = MemorySpec(
    name="hymem",
    build=Ref("recollect.graphs.hymem.memory:build"),
    reach=Ref("recollect.graphs.hymem.memory:turn_ids_in_memory"),
)

SPEC = MethodSpec(
    name="hymem",
    graph=Ref("recollect.graphs.hymem.graph:graph"),
    context=HyMemContext,
    memory=MEMORY,
    step_limit=Ref("recollect.graphs.hymem.graph:recursion_limit"),
)
