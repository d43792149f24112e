"""MGRetrieval's contract with the rest of recollect (`recollect.graphs.spec`)."""

from __future__ import annotations

from recollect.graphs.mgretrieval.metrics import AUX_LLM_NODES
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.spec import MemorySpec, MethodSpec, Ref

# The keyword vocabulary and its keyword-to-turn map (one keyword call per session).
MEMORY = MemorySpec(
    name="mgretrieval",
    build=Ref("recollect.graphs.mgretrieval.memory:build"),
    reach=Ref("recollect.graphs.mgretrieval.memory:turn_ids_in_memory"),
)

SPEC = MethodSpec(
    name="mgretrieval",
    graph=Ref("recollect.graphs.mgretrieval.graph:graph"),
    context=MGRetrievalContext,
    memory=MEMORY,
    step_limit=Ref("recollect.graphs.mgretrieval.graph:recursion_limit"),
    eval_fields=Ref("recollect.graphs.mgretrieval.graph:eval_fields"),
    aux_llm_nodes=AUX_LLM_NODES,
)
