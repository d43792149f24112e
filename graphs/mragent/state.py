"""MRAgent's keys of the graph state, beside the shared ones of `recollect.state.MemoryState`.

Every key is optional and per question: a new question on a thread resets it (see
`recollect.steps.start_question`). README.md in this folder says what each node writes.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

from recollect.state import MemoryState, union_ids


class MRAgentState(MemoryState):
    """The `mragent` graph's state."""

    mra_cues: NotRequired[list[dict[str, Any]]]
    mra_time_window: NotRequired[list[str] | None]
    mra_seed: NotRequired[dict[str, Any]]
    mra_seen_cues: NotRequired[Annotated[list[str], union_ids]]
    mra_visible_ids: NotRequired[Annotated[list[str], union_ids]]
    mra_raw_reply: NotRequired[dict[str, Any] | None]
    mra_pending_calls: NotRequired[list[dict[str, Any]]]
    mra_dropped_calls: NotRequired[list[dict[str, Any]]]
    mra_tool_log: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    mra_calls_total: NotRequired[int]
    mra_confidence: NotRequired[float | None]
    mra_forced_final: NotRequired[bool]
    # the last navigate call's prompt and reply, which the final answer call continues (mra_answer_continues)
    mra_exchange: NotRequired[dict[str, Any] | None]
