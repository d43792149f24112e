"""The core of every graph's state, with its reducers.

Values are plain JSON (str, int, float, bool, list, dict), plus LangChain messages in `messages`,
so checkpoints load without custom serializers and Studio renders an input form and a chat view.
Keys without a reducer are replaced by the last writer. Each method extends `MemoryState` with its
own optional keys, carrying its method prefix, in `graphs/<method>/state.py`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired

from langchain_core.messages import AnyMessage, MessageLikeRepresentation
from langgraph.channels.last_value import LastValue
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field, model_validator
from pydantic.json_schema import SkipJsonSchema
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


class NamespaceBindingError(ValueError):
    """A run names a namespace other than the one its thread reads (or one that is not text)."""


def bind_namespace(bound: str | None, named: Any, thread: str = "this thread") -> str | None:
    """The namespace a thread reads after a run names `named`: a thread keeps the first one it read.

    Empty names none (a chat-only input) and keeps the bound one. The one rule every way in shares: the
    graph's `namespace` channel and `start_question` (so a Python caller's run, an `update_state` and a
    `Command` cannot switch a thread), the CLI before it asks, and the server before it queues a run (409).
    """
    if named is None or named == "":
        return bound
    if not isinstance(named, str):
        raise NamespaceBindingError(f"the namespace must be a string, got {type(named).__name__}")
    if bound and named != bound:
        raise NamespaceBindingError(f"{thread} reads namespace {bound[:200]!r} and cannot switch to "
                                    f"{named[:200]!r}: start a new thread for another namespace")
    return named


class RefusedSwitch(str):
    """The thread's namespace, as the nodes of one step see it after a write asked for another (`asked`)."""

    asked: Any

    def __new__(cls, bound: str, asked: Any) -> RefusedSwitch:
        out = super().__new__(cls, bound)
        out.asked = asked
        return out


class BoundNamespace(LastValue):
    """The `namespace` channel: once a thread has a namespace, no write replaces it.

    A write naming another (a run's input, `update_state`, a `Command`'s update, LangGraph's overwrite form
    `{"__overwrite__": ...}`, which a reducer's channel would apply without its reducer) keeps the thread's
    namespace, and for that one step the value is a `RefusedSwitch` saying what was asked: the next
    `start_question` fails the run with `bind_namespace`'s error. The channel itself never raises: a run's
    input is stored as pending writes before it is applied, so an error here would fail every later run on
    the thread too. Only the namespace is checkpointed, never the refused request.
    """

    def __eq__(self, value: object) -> bool:
        return isinstance(value, BoundNamespace)

    def __hash__(self) -> int:
        return hash(BoundNamespace)

    def update(self, values: Sequence[Any]) -> bool:
        bound = self.value if isinstance(self.value, str) and self.value else None
        named = [v for v in values if v is not None and v != ""]
        if not named:  # a new step, or writes that name none: the refusal of the step before is over
            if isinstance(self.value, RefusedSwitch):
                self.value = str(self.value)
            return False
        for asked in named:
            try:
                bound = bind_namespace(bound, asked)
            except NamespaceBindingError:
                bound = self.value = RefusedSwitch(str(bound or ""), asked)
                return True
        self.value = bound
        return True

    def checkpoint(self) -> Any:
        return str(self.value) if isinstance(self.value, RefusedSwitch) else self.value


def thread_namespace(value: Any) -> str:
    """The namespace a run reads from its state's `namespace` ("" = none yet); a write of this run that asked
    for another (`RefusedSwitch`) fails the run here, in `start_question`, with `bind_namespace`'s error."""
    if isinstance(value, RefusedSwitch):
        bind_namespace(str(value) or None, value.asked)
    return str(value or "")


# A thread's namespace: its first non-empty one stays (see `BoundNamespace`).
Namespace = Annotated[str, BoundNamespace]


def add_usage(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Sum usage records, overall and per node (see `recollect.llm.usage.UsageRecord`)."""
    from recollect.llm.usage import merge_usage

    return merge_usage(left or {}, right or {})


def add_chat_messages(left: list[AnyMessage] | None, right: Any) -> list[AnyMessage]:
    """LangGraph's `add_messages`, where None adds nothing: a tool made from a graph (`graph.as_tool()`) passes
    every input field, None for the ones the model left out."""
    if right is None:
        return list(left or [])
    base: list[MessageLikeRepresentation] = list(left or [])  # the list type add_messages takes (lists are invariant)
    # add_messages is typed as returning `Messages` (a list or one message), though a list in gives a list of
    # messages out
    return add_messages(base, right)  # type: ignore[return-value]


class InputState(BaseModel):
    """A question about a namespace's memory."""

    # `question` is the one field in the JSON schema, so a tool made from the graph (`graph.as_tool()`, an
    # MCP client) asks for the question only. Two more inputs are accepted but left out of it: `namespace`,
    # whose memory to read (default: the thread's, else the `namespace` setting, which is how an app fixes it
    # without the model choosing: `create_graph(..., namespace="alice")`, an assistant's configuration), and
    # `messages`, chat input instead of `question` (Studio's chat view, `create_agent`-style callers: the
    # last human message is the question).
    question: str = Field(description="A self-contained question about the remembered conversations")
    namespace: SkipJsonSchema[str | None] = Field(
        default=None, description="Whose memory to read; default: the thread's, else the `namespace` setting")
    messages: SkipJsonSchema[Annotated[list[AnyMessage], add_chat_messages] | None] = Field(
        default=None, description="Chat input instead of `question`: the last human message is the question")

    @model_validator(mode="before")
    @classmethod
    def _question_from_messages(cls, data: Any) -> Any:
        """Chat input names no `question`: the last human message is the question (start_question reads it
        from `messages` again, this only lets a chat-only input validate)."""
        if not isinstance(data, dict):
            return data
        if not data.get("messages"):
            return data
        from langchain_core.messages import HumanMessage, convert_to_messages

        chat = convert_to_messages(data["messages"])  # role dicts ({"role": "human", ...}) too
        data = {**data, "messages": chat}
        if not data.get("question"):
            human = [m for m in chat if isinstance(m, HumanMessage)]
            text = human[-1].text if human else ""
            data["question"] = text if isinstance(text, str) else str(text)
        return data


class OutputState(TypedDict, total=False):
    """What a run returns: the answer, the turn ids it rests on, the method and what it cost, plus the thread's
    `messages` for chat clients. The per-question working state (evidence, trace, usage...) stays in the
    checkpointed state: `graph.get_state(config)`, `stream_mode="values"`, or `recollect.ask`, which returns it."""

    answer: str
    supports: list[str]
    method: str
    cost: dict[str, Any]
    messages: Annotated[list[AnyMessage], add_chat_messages]


class MemoryState(TypedDict):
    """The keys every graph shares: input, the evidence–gap tracker, the answer, trace and usage."""

    # input
    namespace: Namespace
    question: str
    # the thread's conversation: every question and answer, kept across questions
    messages: NotRequired[Annotated[list[AnyMessage], add_chat_messages]]
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
    # the graph that answered and what the question cost (calls, tokens), written by finish_question
    method: NotRequired[str]
    cost: NotRequired[dict[str, Any]]
    # observability
    trace: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    usage: NotRequired[Annotated[dict[str, Any], add_usage]]
