"""MGRetrieval's contract with the rest of recollect (`recollect.graphs.spec`): graph.py's `graph` and its eval
columns, memory.py's keyword vocabulary and keyword-to-turn map, and the keyword selection node, whose calls go
to the auxiliary model."""

from __future__ import annotations

from recollect.graphs.mgretrieval.metrics import AUX_LLM_NODES
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.spec import folder_memory, folder_method

SPEC = folder_method("mgretrieval", "mgretrieval", MGRetrievalContext, folder_memory("mgretrieval", "mgretrieval"),
                     with_eval_fields=True, aux_llm_nodes=AUX_LLM_NODES)
