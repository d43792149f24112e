"""The server's `remember` graph: a running chat's newest turns into a namespace (`recollect.remember`).

One node that returns as soon as the turns, their sessions and MemR3's chunks are stored (no model call); the
memories that need the model (HyMem, MGRetrieval, MRAgent, as the namespace has them or `methods` asks) are
built afterwards by the server's background queue, so a client, an MCP tool call included, never waits for
them. `recollect namespaces` and each question's trace show those builds until they are done.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from recollect.agent_memory import remember as remember_turns
from recollect.graphs.registry import AllMethodsContext
from recollect.namespace_ids import NamespaceError


class ChatMessage(BaseModel):
    """One message of the conversation."""

    role: str = Field(description="who said it: user (or human) or assistant (or ai); others are skipped")
    content: str = Field(description="what was said")
    name: str | None = Field(default=None, description="the speaker's name (default: User / Assistant)")
    timestamp: str | None = Field(default=None, description="when, ISO 8601 (default: now)")
    id: str | None = Field(default=None, description="a stable message id; the same id is remembered once")


class RememberInput(BaseModel):
    """What to remember: the conversation's newest messages (older ones already remembered are skipped)."""

    messages: list[ChatMessage] = Field(description="the conversation's messages, oldest first")
    thread: str | None = Field(default=None, description="the conversation they belong to (its own sessions)")
    namespace: SkipJsonSchema[str | None] = Field(
        default=None, description="whose memory; default: the `namespace` setting")
    methods: SkipJsonSchema[list[str] | None] = Field(
        default=None, description="memories to build besides the ones the namespace has (hymem, mragent, ...)")


class RememberOutput(TypedDict, total=False):
    namespace: str
    added: list[str]
    sessions: list[int]
    skipped: int
    queued: list[str]


class RememberState(RememberOutput):
    messages: list[Any]
    thread: NotRequired[str | None]
    methods: NotRequired[list[str] | None]


def remember(state: RememberState, runtime: Runtime[AllMethodsContext]) -> dict[str, Any]:
    namespace = state.get("namespace") or runtime.context.namespace
    if not namespace:
        raise NamespaceError("no namespace: pass `namespace` in the input or set the `namespace` setting")
    messages = [m.model_dump() if isinstance(m, BaseModel) else m for m in state.get("messages") or []]
    out = remember_turns(messages, namespace, thread_id=state.get("thread"), methods=state.get("methods"),
                         context=runtime.context)
    return {k: out[k] for k in ("added", "sessions", "skipped", "queued")} | {"namespace": namespace}


builder = StateGraph(RememberState, context_schema=AllMethodsContext, input_schema=RememberInput,
                     output_schema=RememberOutput)
builder.add_node("remember", remember)
builder.add_edge(START, "remember")
builder.add_edge("remember", END)
graph = builder.compile()
graph.name = "remember"
