"""HyMem's keys of the graph state, beside the shared ones of `recollect.state.MemoryState`.

Every key is optional and per question: a new question on a thread resets it (see
`recollect.steps.start_question`). README.md in this folder says what each node writes.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

from recollect.state import MemoryState, union_ids


class HyMemState(MemoryState):
    """The `hymem` graph's state."""

    hymem_status: NotRequired[str | None]
    # the summary ids the light call read (with hymem_light_turn_tokens: the turn ids)
    hymem_light_ids: NotRequired[list[str]]
    hymem_deep_candidates: NotRequired[list[str]]
    hymem_selected_ids: NotRequired[list[str]]
    hymem_sessions_shown: NotRequired[Annotated[list[str], union_ids]]
    hymem_route: NotRequired[str | None]
    # the last light or deep call's messages and reply, for the final answer call to continue
    # (hymem_final_answer_continues)
    hymem_exchange: NotRequired[dict[str, str] | None]
    # why the latest light round answered or escalated (the answer node's explanation of a deep answer)
    hymem_light_why: NotRequired[str | None]
    hymem_next: NotRequired[str | None]  # reflect's edge: "light" (another round) or "answer"
    hymem_reflections: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
