"""MemR3's contract with the rest of recollect (`recollect.graphs.spec`): graph.py's `graph`, the chunk memory."""

from __future__ import annotations

from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.spec import CHUNKS, folder_method

SPEC = folder_method("memr3", "memr3", MemR3Context, CHUNKS)
