"""MRAgent's contract with the rest of recollect (`recollect.graphs.spec`)."""

from __future__ import annotations

from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.spec import MemorySpec, MethodSpec, Ref

# Events with their cues, tags and topics (call A per window of turns), kept in the store.
MEMORY = MemorySpec(
    name="mragent",
    build=Ref("recollect.graphs.mragent.memory:build"),
    reach=Ref("recollect.graphs.mragent.memory:turn_ids_in_memory"),
)

SPEC = MethodSpec(
    name="mragent",
    graph=Ref("recollect.graphs.mragent.graph:graph"),
    context=MRAgentContext,
    memory=MEMORY,
    step_limit=Ref("recollect.graphs.mragent.graph:recursion_limit"),
)
