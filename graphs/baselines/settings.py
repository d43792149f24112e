"""The baselines' settings.

rag reads MemR3's chunk memory, so its context carries the chunk settings too.
"""

from __future__ import annotations

from dataclasses import dataclass

from recollect.memory.chunks import ChunkSettings
from recollect.settings import Context, setting


@dataclass(kw_only=True)
class BaselineSettings:
    """rag's and full_context's own settings."""

    rag_top_k: int = setting(5, "rag baseline: chunks retrieved for the question", ge=1)
    # the local model has an 8k window; keep the newest turns that fit
    full_context_max_tokens: int = setting(
        6000, "full_context baseline: prompt budget; the newest turns that fit are shown", ge=1)


@dataclass(kw_only=True)
class BaselineContext(BaselineSettings, ChunkSettings, Context):
    """The `rag` and `full_context` graph's runtime settings: the shared ones plus the baselines' and the chunk memory's."""
