"""The two baselines' contracts (`recollect.graphs.spec`): one-shot rag over MemR3's chunk memory, and the
whole conversation in one prompt (no memory of its own: the stored turns). Both graphs live in graph.py."""

from __future__ import annotations

from recollect.graphs.baselines.settings import BaselineContext
from recollect.graphs.spec import CHUNKS, folder_method

RAG = folder_method("rag", "baselines", BaselineContext, CHUNKS, graph="rag")
FULL_CONTEXT = folder_method("full_context", "baselines", BaselineContext, None, graph="full_context")
