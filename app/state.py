"""The core of every graph's state, with its reducers.

Values are plain JSON (str, int, float, bool, list, dict), plus LangChain messages in `messages`,
so checkpoints load without custom serializers and Studio renders an input form and a chat view.
Keys without a reducer are replaced by the last writer. Each method extends `MemoryState` with its
own optional keys, carrying its method prefix, in `graphs/<method>/state.py`.
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
    answer_before_rewrite: str | None
    shown_turn_ids: list[str]
    retrieved_turn_ids: list[str]
    evidence: list[str]
    gaps: list[str]
    masks: list[str]
    iteration: int
    critical_memories: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    usage: dict[str, Any]
    messages: Annotated[list[AnyMessage], add_messages]


class MemoryState(TypedDict):
    """The keys every graph shares: input, the evidence–gap tracker, the answer, trace and usage."""

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
    # every turn id whose text some prompt of this question showed the model, in first-shown order (the
    # eval's evidence recall and the date step read it; each trace record also names its own)
    shown_turn_ids: NotRequired[Annotated[list[str], union_ids]]
    # every turn id some retrieval step of this question brought in as a candidate, before the prompt
    # budget or a cap dropped any (the eval's `evidence_retrieved`: retrieved but never shown = a packing
    # or cap loss)
    retrieved_turn_ids: NotRequired[Annotated[list[str], union_ids]]
    retrieved: NotRequired[list[dict[str, Any]]]
    iteration: NotRequired[int]
    # answer
    draft_answer: NotRequired[str | None]
    # the graph's answer before its final span rewrite (MRAgent's, MGRetrieval's, MemR3's optional one);
    # None when no rewrite ran. The eval scores both to show what the rewrite did.
    answer_before_rewrite: NotRequired[str | None]
    answer: NotRequired[str]
    supports: NotRequired[list[str]]
    # observability
    trace: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    usage: NotRequired[Annotated[dict[str, Any], add_usage]]
