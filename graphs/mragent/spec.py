"""MRAgent's contract with the rest of recollect (`recollect.graphs.spec`): graph.py's `graph`, and memory.py's
events with their cues, tags and topics (call A per window of turns)."""

from __future__ import annotations

from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.spec import folder_memory, folder_method

SPEC = folder_method("mragent", "mragent", MRAgentContext, folder_memory("mragent", "mragent"))
