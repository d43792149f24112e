"""HyMem's contract with the rest of recollect (`recollect.graphs.spec`): graph.py's `graph`, and memory.py's
Level-1 summary items linked to their turns, and the raw sessions."""

from __future__ import annotations

from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.spec import folder_memory, folder_method

SPEC = folder_method("hymem", "hymem", HyMemContext, folder_memory("hymem", "hymem"))
