"""The `ingest` graph (load a dialogue into a namespace and build each method's memory) and the `forget`
graph (delete everything stored for a namespace).

Exposed through `langgraph.json` so Studio and the HTTP API can ingest and forget as well as ask. The
`ingest` graph takes the dialogue's content (`dialogue`: LoCoMo JSON or the simple format, as a JSON
object, list or text), never a path: a server reads no file a client names. Python reads files with
`recollect.ingest(path, namespace)`. Content over `RECOLLECT_INGEST_MAX_BYTES` (5 MiB by default) or not a
dialogue fails the run with one error that names the record and field but quotes none of the content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from recollect.dialogue.json_input import check_json_value, parse_json_text
from recollect.dialogue.loaders import (
    _check_unique_ids,
    _simple_conversations,
    conversation_from_locomo,
    is_locomo,
)
from recollect.dialogue.models import Conversation, DialogueError
from recollect.graphs.registry import AllMethodsContext, available_builders
from recollect.ingestion import ingest_conversation
from recollect.runner import forget as forget_namespace
from recollect.settings import get_settings
from recollect.steps import workspace
from recollect.trace import emit

LABEL = "dialogue"  # how errors name the content (the loaders name a file here)
# Field names the loaders quote in their errors; any other quoted text is the dialogue's own and is elided.
_FIELDS = frozenset({"sample_id", "conversation", "speaker_a", "speaker_b", "speaker", "text", "blip_caption",
                     "dia_id", "speakers", "sessions", "id", "turns", "date_time", "image_caption", "img_urls", "session_N"})
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


class IngestState(TypedDict):
    namespace: str
    dialogue: dict[str, Any] | list[Any] | str
    conversation_id: NotRequired[str | None]
    methods: NotRequired[list[str] | None]
    reports: NotRequired[list[dict[str, Any]]]
    trace: NotRequired[list[dict[str, Any]]]


def _safe(message: str, samples: list[Any]) -> str:
    """A loader's error without the dialogue's own text: a LoCoMo sample named by its position instead of
    its id, quoted values elided, the length capped."""
    ids = [(sample_id, i) for i, s in enumerate(samples)
           if isinstance(s, dict) and isinstance(sample_id := s.get("sample_id"), str) and sample_id]
    for sample_id, i in sorted(ids, key=lambda x: -len(x[0])):
        if message.startswith(f"{LABEL}: {sample_id}"):
            message = f"{LABEL}: [{i}]" + message[len(f"{LABEL}: {sample_id}"):]
            break
    out = _QUOTED.sub(lambda m: m.group(0) if set(m.group(0)[1:-1].split(".")) <= _FIELDS else "'…'", message)
    return out if len(out) <= 300 else out[:299] + "…"


def _size(content: Any) -> int:
    if isinstance(content, str):
        return len(content.encode("utf-8"))
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _check_text(content: str) -> None:
    """JSON text the size check can encode: no lone surrogate in the text itself (a JSON escape of one is
    caught when it is parsed)."""
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DialogueError(f"{LABEL}: the text holds a lone UTF-16 surrogate at character {exc.start}, "
                            "which is not text and cannot be stored") from None


def conversation_from_content(content: Any, conversation_id: str | None = None,
                              max_bytes: int | None = None) -> Conversation:
    """One conversation from dialogue content: a LoCoMo or simple-format JSON object or list, or its text.

    Raises `DialogueError` naming the record and field; no message quotes the content.
    """
    max_bytes = max_bytes or get_settings().ingest_max_bytes
    if content is None or content == "" or content == {} or content == []:
        raise DialogueError(f"{LABEL}: missing: pass the dialogue's content (LoCoMo JSON or the simple format) "
                            "as `dialogue`; the server reads no file path")
    if not isinstance(content, dict | list | str):
        raise DialogueError(f"{LABEL}: expected a JSON object, a list or JSON text, got {type(content).__name__}")
    try:
        # Nesting and unstorable text first: measuring the size encodes (and recurses into) the content.
        if isinstance(content, str):
            _check_text(content)
        else:
            check_json_value(content, LABEL)
    except DialogueError as exc:
        raise DialogueError(_safe(str(exc), [])) from None
    size = _size(content)
    if size > max_bytes:
        raise DialogueError(f"{LABEL}: {size:,} bytes is over the server's limit of {max_bytes:,} "
                            "(RECOLLECT_INGEST_MAX_BYTES); send fewer sessions per run, they extend the namespace")
    data: Any = content  # a JSON value: the content, or what its text parses to
    if isinstance(content, str):
        try:
            data = parse_json_text(content, LABEL)
        except json.JSONDecodeError as exc:
            raise DialogueError(f"{LABEL}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        except DialogueError as exc:
            raise DialogueError(_safe(str(exc), [])) from None
    label = Path(LABEL)
    samples: list[Any] = ([data] if isinstance(data, dict) else data) if is_locomo(data) else []
    try:
        if samples:
            found = [conversation_from_locomo(s, label, i) for i, s in enumerate(samples)]
        elif isinstance(data, dict | list):
            found = _simple_conversations(data, label)
        else:
            raise DialogueError(f"{LABEL}: top level must be a JSON object or a list, got {type(data).__name__}")
        _check_unique_ids(found, label)
    except DialogueError as exc:
        raise DialogueError(_safe(str(exc), samples)) from None
    if conversation_id is not None:
        found = [c for c in found if c.id == conversation_id]
        if not found:
            raise DialogueError(f"{LABEL}: no conversation has the given conversation_id")
    elif len(found) > 1:
        raise DialogueError(f"{LABEL}: holds {len(found)} conversations; pass conversation_id to choose one")
    conversation = found[0]
    if not any(session.turns for session in conversation.sessions):
        raise DialogueError(f"{LABEL}: the conversation has no turns")
    return conversation


def ingest(state: IngestState, runtime: Runtime[AllMethodsContext]) -> dict[str, Any]:
    conversation = conversation_from_content(state.get("dialogue"), state.get("conversation_id"))
    known = available_builders()
    methods = state.get("methods") or known
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(map(str, unknown))[:200]}; known: {', '.join(known)}")
    # into the run's store (`runtime.store`: the server's, which is the data directory's)
    ws = workspace(runtime.context)
    reports = [r.as_dict() for r in ingest_conversation(conversation, state["namespace"], runtime.context,
                                                        methods=methods, ws=ws)]
    return {"reports": reports, "trace": emit("ingest", conversation=conversation.id, methods=methods, reports=reports)}


def _one_node_graph(name: str, state: type, node: Callable[..., dict[str, Any]],
                    ) -> CompiledStateGraph[Any, AllMethodsContext, Any, Any]:
    builder: StateGraph[Any, AllMethodsContext, Any, Any] = StateGraph(state, context_schema=AllMethodsContext)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    compiled = builder.compile()
    compiled.name = name
    return compiled


graph = _one_node_graph("ingest", IngestState, ingest)


class ForgetState(TypedDict):
    namespace: str
    forgotten: NotRequired[dict[str, Any]]


def forget(state: ForgetState, runtime: Runtime[AllMethodsContext]) -> dict[str, Any]:
    return {"forgotten": forget_namespace(state["namespace"], runtime.context, ws=workspace(runtime.context))}


forget_graph = _one_node_graph("forget", ForgetState, forget)
