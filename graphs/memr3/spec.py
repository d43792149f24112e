"""MemR3's contract with the rest of recollect (`recollect.graphs.spec`)."""

from __future__ import annotations

from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.spec import CHUNKS, MethodSpec, Ref

SPEC = MethodSpec(
    name="memr3",
    graph=Ref("recollect.graphs.memr3.graph:graph"),
    context=MemR3Context,
    memory=CHUNKS,
    step_limit=Ref("recollect.graphs.memr3.graph:recursion_limit"),
)
