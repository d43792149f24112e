"""The tools recollect's MCP endpoint offers: one per served graph, and one per assistant the caller created.

Each tool's description is its graph's in langgraph.json (what it is good for, what it costs, what it takes);
its input schema holds only what a model should write (a question, the messages to remember, a dialogue's
content: never a server path), plus `namespace`. The namespace is the caller's: with auth on an `enum` of
the namespaces its API key may use, defaulting to its own; with auth off whatever the MCP URL's
`?namespace=` names, else the model must give one. An answering tool's output is
`{answer, supports, method, cost}` (`outputSchema`), the same narrow output a run returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from recollect.service.config import graph_specs

ANSWERING = ("memr3", "rag", "full_context", "mragent", "hymem", "mgretrieval")
_MCP_NAME = re.compile(r"[^A-Za-z0-9_.-]+")  # MCP tool names: 1-128 of [A-Za-z0-9_.-]

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "a short answer, or 'No information available'"},
        "supports": {"type": "array", "items": {"type": "string"},
                     "description": "ids of the remembered conversation turns the answer rests on"},
        "method": {"type": "string", "description": "the method that answered"},
        "cost": {"type": "object", "description": "model calls, prompt and completion tokens, seconds in the model"},
    },
    "required": ["answer", "supports", "method", "cost"],
}
REMEMBER_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "added": {"type": "array", "items": {"type": "string"}, "description": "ids of the turns added"},
        "skipped": {"type": "integer", "description": "messages already remembered"},
        "queued": {"type": "array", "items": {"type": "string"},
                   "description": "memories now being built in the background"},
    },
    "required": ["added", "skipped", "queued"],
}
_MESSAGES: dict[str, Any] = {
    "type": "array", "description": "the conversation's messages, oldest first",
    "items": {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"type": "string", "enum": ["user", "assistant"]},
        "content": {"type": "string"},
        "name": {"type": "string", "description": "the speaker's name"},
        "timestamp": {"type": "string", "description": "when it was said, ISO 8601"},
        "id": {"type": "string", "description": "a stable id: a message with a known id is skipped"}}},
}


@dataclass(frozen=True)
class Tool:
    name: str
    graph: str  # the graph id
    assistant: str  # what a run names: the graph id, or the assistant's id
    description: str
    namespace: str | None = None  # the namespace an assistant's settings name: its tool's default

    def kind(self) -> str:
        return "answer" if self.graph in ANSWERING else self.graph


def namespace_property(allowed: list[str] | None, default: str | None) -> dict[str, Any]:
    """The `namespace` argument: the caller's namespaces (auth on) or any id, with its default if there is one."""
    prop: dict[str, Any] = {"type": "string", "description": "whose memory: one of yours"
                            + (f" (default {default!r})" if default else "")}
    if allowed is not None:
        prop["enum"] = allowed
    if default:
        prop["default"] = default
    return prop


def input_schema(tool: Tool, namespace: dict[str, Any]) -> dict[str, Any]:
    required = [] if "default" in namespace else ["namespace"]
    if tool.kind() == "answer":
        props: dict[str, Any] = {"question": {"type": "string", "description": "a self-contained question about "
                                                                               "the remembered conversations"}}
        required.insert(0, "question")
    elif tool.graph == "remember":
        props = {"messages": _MESSAGES, "thread": {"type": "string", "description": "the conversation they belong "
                                                                                     "to; its turns stay together"}}
        required.insert(0, "messages")
    elif tool.graph == "ingest":
        props = {"dialogue": {"type": ["object", "array", "string"],
                              "description": "the dialogue's content: LoCoMo JSON or recollect's simple format"},
                 "conversation_id": {"type": "string", "description": "which conversation, when it holds several"}}
        required.insert(0, "dialogue")
    else:  # forget
        props = {}
    return {"type": "object", "properties": {**props, "namespace": namespace}, "required": required,
            "additionalProperties": False}


def tool_annotations(tool: Tool) -> dict[str, Any]:
    """MCP's hints: answering reads, remember and ingest add (idempotently), forget destroys."""
    return {"readOnlyHint": tool.kind() == "answer", "destructiveHint": tool.graph == "forget",
            "idempotentHint": tool.graph in ("remember", "ingest", "forget"), "openWorldHint": False}


def output_schema(tool: Tool) -> dict[str, Any] | None:
    return ANSWER_SCHEMA if tool.kind() == "answer" else REMEMBER_OUTPUT if tool.graph == "remember" else None


def tool_name(text: str) -> str:
    return _MCP_NAME.sub("_", text.strip()).strip("_")[:128]


def catalog(assistants: list[dict[str, Any]]) -> dict[str, Tool]:
    """Every tool by name: the served graphs, then the caller's own assistants (the server's own, made from
    the graphs, are the graphs' tools). An assistant created without a name is `<graph>_<its id's first 8>`,
    never `Untitled`; a name taken already gets the id too."""
    specs = graph_specs()
    tools = {name: Tool(name, name, name, spec.get("description") or name) for name, spec in specs.items()}
    for assistant in assistants:
        graph = str(assistant.get("graph_id") or "")
        if (assistant.get("metadata") or {}).get("created_by") == "system" or graph not in specs:
            continue
        ident = str(assistant["assistant_id"])
        given = str(assistant.get("name") or "").strip()
        name = tool_name(given) if given and given != "Untitled" else ""
        if not name or name in tools:
            name = tool_name(f"{name or graph}_{ident[:8]}")
        described = assistant.get("description") or f"{specs[graph].get('description', graph)} (Your assistant " \
                                                     f"{given or name!r}: the {graph} graph with its own settings.)"
        settings = assistant.get("context") or (assistant.get("config") or {}).get("configurable") or {}
        tools[name] = Tool(name, graph, ident, described, settings.get("namespace") or None)
    return tools
