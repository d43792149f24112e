"""The backbone for the peers: the eval's own answer model, and a metered model for the peers' own calls.

- `backbone()` yields the answer model exactly as `recollect eval` builds it (same endpoint, temperature,
  completion cap and JSON grammar), starting the embedded llama.cpp server as a context manager when no
  `RECOLLECT_LLM_BASE_URL` is set, and stopping it on exit.
- `peer_model(...)` is the chat model handed to mem0 / LangMem. It counts every call (calls, tokens,
  cached tokens, latency) in a `UsageMeter`, can ask for JSON mode on every call (what mem0 requests but
  its LangChain provider drops), sends `parallel_tool_calls: true` with tools (OpenAI's default, which
  LangMem's prompt relies on and llama.cpp leaves off), and reads Hermes-style tool calls that the server
  left in the text (see `text_tool_calls`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from recollect.llm.structured import measure_call
from recollect.llm.usage import merge_usage
from recollect.settings import get_settings


@dataclass(frozen=True)
class Endpoint:
    """Where the backbone is served: an OpenAI-compatible base URL, its key and model name."""

    base_url: str
    api_key: str
    model: str
    json_whitespace: str = ""  # the embedded server's JSON grammar option (recollect.llm.models)


@contextmanager
def backbone() -> Iterator[tuple[BaseChatModel, Endpoint]]:
    """(answer model, endpoint): the configured endpoint, else the embedded model for the duration."""
    from recollect.llm import models

    s = get_settings()
    if s.llm_base_url:
        ep = Endpoint(s.llm_base_url, s.llm_api_key, s.llm_model)
        yield models._openai(ep.base_url, ep.api_key, ep.model), ep
        return
    from recollect.llm.local_runtime import LocalServer

    with LocalServer() as server:
        ws = s.local_json_whitespace if server.runtime == "xllamacpp" else ""
        ep = Endpoint(server.base_url, "local", server.spec.alias, ws)
        # The same construction as the eval's model (recollect.llm.models.default_chat_model).
        yield models._openai(ep.base_url, ep.api_key, ep.model, json_whitespace=ws), ep


class Reading(NamedTuple):
    usage: dict[str, Any]  # a recollect usage record (calls, tokens, latency, by node)
    text_tool_calls: int  # tool calls read from the reply text (see `text_tool_calls`)
    cut_replies: int  # replies that ran to the completion cap (finish_reason "length")


class UsageMeter:
    """Usage of a peer's own LLM calls; `take()` returns what was used since the last take."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reading = Reading({}, 0, 0)

    def record(self, usage: dict[str, Any], text_tool_calls: int = 0, cut: bool = False) -> None:
        with self._lock:
            r = self._reading
            self._reading = Reading(merge_usage(r.usage, usage), r.text_tool_calls + text_tool_calls,
                                    r.cut_replies + int(cut))

    def take(self) -> Reading:
        with self._lock:
            out, self._reading = self._reading, Reading({}, 0, 0)
            return out


def _tool_names(kwargs: dict[str, Any]) -> set[str]:
    names = set()
    for tool in kwargs.get("tools") or []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and fn.get("name"):
            names.add(str(fn["name"]))
    return names


def text_tool_calls(text: str, names: set[str]) -> list[dict[str, Any]]:
    """Tool calls written as JSON in the reply text: every `{"name": <bound tool>, "arguments": {...}}`.

    The model's chat template (Qwen2.5-Coder's) shows the call format with doubled braces and the model
    copies it, without the `<tool_call>` tags that llama.cpp's Hermes parser looks for; the objects
    themselves are the Hermes format, wherever they sit (tags, code fences, an extra pair of braces).
    """
    decoder = json.JSONDecoder()
    calls: list[dict[str, Any]] = []
    pos = 0
    while (start := text.find("{", pos)) != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        args = obj.get("arguments", obj.get("parameters")) if isinstance(obj, dict) else None
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        if isinstance(obj, dict) and obj.get("name") in names and isinstance(args, dict):
            calls.append({"name": obj["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}",
                          "type": "tool_call"})
            pos = end
        else:
            pos = start + 1  # look inside: the call may be wrapped in another object or in braces
    return calls


def _cut_reply(exc: Exception) -> ChatResult:
    """A reply cut at the completion cap comes back as its text, as our own calls get it
    (`recollect.llm.structured.invoke_counted`); the JSON-mode client raises on it instead. Others re-raise."""
    from recollect.llm.structured import _truncated_reply

    msg = _truncated_reply(exc)
    if msg is None:
        raise exc
    return ChatResult(generations=[ChatGeneration(message=msg)])


@cache  # one class, however many peer models
def _peer_class() -> type:
    from recollect.llm.models import _compat_class

    class PeerChatOpenAI(_compat_class()):  # type: ignore[misc]
        """The eval's chat client plus metering and the tool-call handling described in the module doc."""

        peer_meter: Any = None
        peer_node: str = "peer"

        def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
            payload = super()._get_request_payload(input_, stop=stop, **kwargs)
            if payload.get("tools"):
                payload.setdefault("parallel_tool_calls", True)
            return payload

        def _finish(self, messages: list[BaseMessage], result: ChatResult, kwargs: dict[str, Any],
                    latency: float) -> ChatResult:
            names = _tool_names(kwargs)
            for gen in result.generations:
                msg, parsed = gen.message, 0
                if (names and isinstance(msg, AIMessage) and not msg.tool_calls and not msg.invalid_tool_calls
                        and isinstance(msg.content, str)):
                    calls = text_tool_calls(msg.content, names)
                    if calls:
                        msg.tool_calls = calls
                        parsed += len(calls)
                if self.peer_meter is not None and isinstance(msg, AIMessage):
                    cut = (msg.response_metadata or {}).get("finish_reason") == "length"
                    self.peer_meter.record(measure_call(self.peer_node, messages, msg, latency), parsed, cut)
            return result

        def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            start = time.monotonic()
            try:
                result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
            except Exception as exc:
                result = _cut_reply(exc)
            return self._finish(messages, result, kwargs, time.monotonic() - start)

        async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                             run_manager: Any = None, **kwargs: Any) -> ChatResult:
            start = time.monotonic()
            try:
                result = await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
            except Exception as exc:
                result = _cut_reply(exc)
            return self._finish(messages, result, kwargs, time.monotonic() - start)

    return PeerChatOpenAI


def peer_model(ep: Endpoint, meter: UsageMeter, *, node: str, max_tokens: int, json_mode: bool = False) -> BaseChatModel:
    """The chat model a peer library calls: the backbone's endpoint, metered into `meter`."""
    s = get_settings()
    return _peer_class()(
        base_url=ep.base_url or None, api_key=ep.api_key or "not-needed", model=ep.model or "gpt-4o-mini",
        temperature=s.llm_temperature, timeout=s.llm_timeout_s, max_retries=s.llm_max_retries,
        max_tokens=max_tokens, stream_usage=True,
        model_kwargs={"response_format": {"type": "json_object"}} if json_mode else {},
        peer_meter=meter, peer_node=node,
    )
