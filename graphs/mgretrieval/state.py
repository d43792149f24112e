"""MGRetrieval's keys of the graph state, beside the shared ones of `recollect.state.MemoryState`.

Every key is optional and per question: a new question on a thread resets it (see
`recollect.steps.start_question`). README.md in this folder says what each node writes.
"""

from __future__ import annotations

from typing import Any, NotRequired

from recollect.state import MemoryState


class MGRetrievalState(MemoryState):
    """The `mgretrieval` graph's state."""

    mg_keywords: NotRequired[list[str]]
    mg_pyramid: NotRequired[list[dict[str, Any]]]
    mg_cursor: NotRequired[int]
    mg_group: NotRequired[dict[str, Any] | None]
    mg_new_memories: NotRequired[list[dict[str, Any]]]
    mg_sufficient: NotRequired[bool]
    mg_exhausted: NotRequired[bool]
