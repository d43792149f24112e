"""MGRetrieval's keys of the graph state, beside the shared ones of `recollect.state.MemoryState`.

Every key is optional and per question: a new question on a thread resets it (see
`recollect.steps.start_question`). README.md in this folder says what each node writes.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired

from typing_extensions import TypedDict

from recollect.state import MemoryState


class RoundEntry(TypedDict):
    """One entry of `mg_round_log`: what a round's node did, as the eval counts it (`metrics.round_kinds`).

    `retrieve_round` writes one per round it ran (a round that found nothing writes none) with the
    three round fields; `assess` writes one per assessed round with `grounded` (None when the
    grounding check did not run).
    """

    node: Literal["retrieve_round", "assess"]
    round: int
    speaker_only: NotRequired[bool]  # the round's group was made only of speaker names
    cap_truncated: NotRequired[bool]  # `mg_max_new_per_round` cut the group's new memories
    n_filled: NotRequired[int]  # turns shown by dense fill (`mg_dense_fill`)
    grounded: NotRequired[bool | None]  # the grounding check of a "sufficient" reply (`mg_assess_grounding`)


class MGRetrievalState(MemoryState):
    """The `mgretrieval` graph's state."""

    mg_keywords: NotRequired[list[str]]
    mg_pyramid: NotRequired[list[dict[str, Any]]]
    mg_cursor: NotRequired[int]
    mg_group: NotRequired[dict[str, Any] | None]
    mg_new_memories: NotRequired[list[dict[str, Any]]]
    mg_sufficient: NotRequired[bool]
    mg_exhausted: NotRequired[bool]
    # the last assess call's prompt and reply, for the final answer call to continue (mg_final_answer_continues)
    mg_exchange: NotRequired[dict[str, str] | None]
    # Appended to by each round's nodes; typed so the eval need not search the trace for them.
    mg_round_log: NotRequired[Annotated[list[RoundEntry], operator.add]]
