"""MRAgent's traversal tools: one registry of typed functions behind both tool protocols.

Each tool has a pydantic argument model (`tool_io.py`) and a function `(args, ToolContext) -> ToolResult`
(`traversal.py`). `execute` validates the arguments, runs the function and never raises on model
mistakes (unknown tool, bad arguments, unknown ids become an error result). The graph's `tools` node
calls `execute`; `structured_tools` wraps the same functions as LangChain `StructuredTool`s bound to a
namespace, which is what `bind_tools` advertises in the native protocol.

Masking rule: a result never repeats the raw text of a turn already in `masks`; such turns are listed
by id under `already_shown`. Persona facts and topics are derived text, not masked. A tool does not
mask what it returns: a turn joins `masks` only when the navigate or final prompt actually renders its
line (recollect.graphs.mragent.prompting), so a result cut for lack of room can be shown again later.
Within one `tools` round the context remembers what earlier calls returned, so two calls of a round
never return the same turn twice. See README.md in this folder ("Tools").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.tool_io import (
    EventContextArgs,
    EventIdArgs,
    PersonArgs,
    PersonAspectArgs,
    TagEventsArgs,
    ToolContext,
    ToolResult,
    TopicArgs,
    error_result,
)
from recollect.graphs.mragent.traversal import (
    query_conversation_time,
    query_event_context,
    query_event_keywords,
    query_personal_aspect,
    query_personal_information,
    query_tag_events,
    query_topic_events,
)
from recollect.prompts import load_prompt


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args_model: type[BaseModel]
    fn: Callable[[Any, ToolContext], ToolResult]

    @property
    def description(self) -> str:
        return tool_descriptions().get(self.name, self.name)


REGISTRY: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        ToolSpec("query_tag_events", TagEventsArgs, query_tag_events),
        ToolSpec("query_conversation_time", EventIdArgs, query_conversation_time),
        ToolSpec("query_event_keywords", EventIdArgs, query_event_keywords),
        ToolSpec("query_event_context", EventContextArgs, query_event_context),
        ToolSpec("query_personal_information", PersonArgs, query_personal_information),
        ToolSpec("query_personal_aspect", PersonAspectArgs, query_personal_aspect),
        ToolSpec("query_topic_events", TopicArgs, query_topic_events),
    )
}


def tool_descriptions() -> dict[str, str]:
    out = {}
    for line in load_prompt("mragent", "tool_descriptions").splitlines():
        name, _, text = line.partition(":")
        if text:
            out[name.strip()] = text.strip()
    return out


def execute(name: str, args: Any, tc: ToolContext) -> ToolResult:
    """Run one call; unknown tools, bad arguments and unknown ids become error results."""
    spec = REGISTRY.get(str(name))
    if spec is None:
        return error_result(f"unknown tool '{name}'; available: {', '.join(REGISTRY)}")
    if not isinstance(args, dict):
        return error_result(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
    try:
        parsed = spec.args_model.model_validate(args)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}" for e in exc.errors()[:4])
        return error_result(f"{name}: bad arguments ({why})")
    return spec.fn(parsed, tc)


def _arg_signature(model: type[BaseModel]) -> str:
    parts = []
    for fname, f in model.model_fields.items():
        default = "" if f.is_required() else f"={f.default}"
        parts.append(f"{fname}{default}")
    return ", ".join(parts)


def tool_catalog() -> str:
    """The tools as prompt lines for the JSON protocol: `name(arg, arg=default): description`."""
    return "\n".join(f"- {s.name}({_arg_signature(s.args_model)}): {s.description}" for s in REGISTRY.values())


def structured_tools(ctx: MRAgentContext, namespace: str, question: str = "") -> list[Any]:
    """The registry as LangChain `StructuredTool`s bound to a namespace (fresh masks per call)."""
    from langchain_core.tools import StructuredTool

    from recollect.memory.workspace import open_workspace

    def bind(spec: ToolSpec) -> Callable[..., str]:
        def run(**kwargs: Any) -> str:
            graph = CueTagGraph.load(open_workspace(ctx.data_dir), namespace)
            return execute(spec.name, kwargs, ToolContext(graph=graph, question=question, cfg=ctx)).text

        return run

    return [
        StructuredTool.from_function(func=bind(s), name=s.name, description=s.description, args_schema=s.args_model)
        for s in REGISTRY.values()
    ]


__all__ = ["REGISTRY", "ToolContext", "ToolResult", "ToolSpec", "error_result", "execute", "structured_tools",
           "tool_catalog"]
