"""The two baselines' contracts (`recollect.graphs.spec`): one-shot rag over MemR3's chunk memory, and the
whole conversation in one prompt (no memory of its own: the stored turns)."""

from __future__ import annotations

from recollect.graphs.baselines.settings import BaselineContext
from recollect.graphs.spec import CHUNKS, MethodSpec, Ref

RAG = MethodSpec(
    name="rag",
    graph=Ref("recollect.graphs.baselines.graph:rag"),
    context=BaselineContext,
    memory=CHUNKS,
    step_limit=Ref("recollect.graphs.baselines.graph:recursion_limit"),
)

FULL_CONTEXT = MethodSpec(
    name="full_context",
    graph=Ref("recollect.graphs.baselines.graph:full_context"),
    context=BaselineContext,
    memory=None,
    step_limit=Ref("recollect.graphs.baselines.graph:recursion_limit"),
)
