"""MemR3's keys of the graph state, beside the shared ones of `recollect.state.MemoryState`.

Every key is optional and per question: a new question on a thread resets it (see
`recollect.steps.start_question`). README.md in this folder says what each node writes.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

from recollect.state import MemoryState


class MemR3State(MemoryState):
    """The `memr3` graph's state."""

    memr3_snippets: NotRequired[list[dict[str, Any]]]
    # each retrieval's snippets of the question, one list per retrieval in order (memr3_answer_snippets = all)
    memr3_retrievals: NotRequired[Annotated[list[list[dict[str, Any]]], operator.add]]
    memr3_decision: NotRequired[str | None]
    memr3_forced: NotRequired[str | None]
    memr3_decision_forced: NotRequired[bool]
    # the latest router reply was unusable (the answer call's `when_thin` check reads it)
    memr3_router_fallback: NotRequired[bool]
    memr3_reflect_streak: NotRequired[int]
    memr3_retrieval_attempts: NotRequired[int]
    memr3_reasoning: NotRequired[str | None]
    memr3_queries: NotRequired[Annotated[list[str], operator.add]]
    memr3_tracker: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    # memr3_answer_continues: the router call that chose answer, as sent and answered ({"system", "user",
    # "reply", "carried"}); None after any other router step, a retried reply or a skipped call
    memr3_exchange: NotRequired[dict[str, Any] | None]
