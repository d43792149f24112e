"""The one state schema shared by every graph, with its reducers.

Values are plain JSON (str, int, float, bool, list, dict), plus LangChain messages in `messages`,
so checkpoints load without custom serializers and Studio renders an input form and a chat view.
Keys without a reducer are replaced by the last writer. Method-specific keys are optional and
carry their method prefix.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


def union_ids(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Ordered set union: keeps first-seen order, never duplicates an id (used for `masks`)."""
    out = list(left or [])
    seen = set(out)
    for item in right or []:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def add_usage(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Sum usage records, overall and per node (see `recollect.llm.usage.UsageRecord`)."""
    from recollect.llm.usage import merge_usage

    return merge_usage(left or {}, right or {})


class InputState(TypedDict, total=False):
    """What a caller passes in: the namespace to read and the question to answer.

    Chat clients (Studio's chat view, `create_agent`-style callers) may send `messages` instead of
    `question`: the last human message is the question. `namespace` may be left out on a thread
    that already has one, or when the `namespace` setting names it.
    """

    namespace: str
    question: str
    messages: Annotated[list[AnyMessage], add_messages]


class OutputState(TypedDict, total=False):
    answer: str
    supports: list[str]
    evidence: list[str]
    gaps: list[str]
    masks: list[str]
    iteration: int
    critical_memories: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    usage: dict[str, Any]
    messages: Annotated[list[AnyMessage], add_messages]


class MemoryState(TypedDict):
    # input
    namespace: str
    question: str
    # the thread's conversation: every question and answer, kept across questions
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    # id of the human message the current question came from (tells a new chat message from an old one)
    question_message_id: NotRequired[str | None]
    # retrieval and the evidence–gap tracker
    query: NotRequired[str | None]
    evidence: NotRequired[list[str]]
    gaps: NotRequired[list[str]]
    critical_memories: NotRequired[list[dict[str, Any]]]
    masks: NotRequired[Annotated[list[str], union_ids]]
    retrieved: NotRequired[list[dict[str, Any]]]
    iteration: NotRequired[int]
    # answer
    draft_answer: NotRequired[str | None]
    answer: NotRequired[str]
    supports: NotRequired[list[str]]
    # observability
    trace: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    usage: NotRequired[Annotated[dict[str, Any], add_usage]]

    # --- MemR3 (specs/methods/memr3.md §3.2)
    memr3_snippets: NotRequired[list[dict[str, Any]]]
    memr3_decision: NotRequired[str | None]
    memr3_forced: NotRequired[str | None]
    memr3_decision_forced: NotRequired[bool]
    memr3_reflect_streak: NotRequired[int]
    memr3_retrieval_attempts: NotRequired[int]
    memr3_reasoning: NotRequired[str | None]
    memr3_queries: NotRequired[Annotated[list[str], operator.add]]
    memr3_tracker: NotRequired[Annotated[list[dict[str, Any]], operator.add]]

    # --- MRAgent (specs/methods/mragent.md §3.2)
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

    # --- HyMem (specs/methods/hymem.md §3.2)
    hymem_status: NotRequired[str | None]
    hymem_light_ids: NotRequired[list[str]]
    hymem_deep_candidates: NotRequired[list[str]]
    hymem_selected_ids: NotRequired[list[str]]
    hymem_sessions_shown: NotRequired[Annotated[list[str], union_ids]]
    hymem_route: NotRequired[str | None]
    hymem_next: NotRequired[str | None]  # reflect's edge: "light" (another round) or "answer"
    hymem_reflections: NotRequired[Annotated[list[dict[str, Any]], operator.add]]

    # --- MGRetrieval (specs/methods/mgretrieval.md §3.2)
    mg_keywords: NotRequired[list[str]]
    mg_pyramid: NotRequired[list[dict[str, Any]]]
    mg_cursor: NotRequired[int]
    mg_group: NotRequired[dict[str, Any] | None]
    mg_new_memories: NotRequired[list[dict[str, Any]]]
    mg_sufficient: NotRequired[bool]
    mg_exhausted: NotRequired[bool]
