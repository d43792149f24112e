"""One structured-output helper for every node.

`call_structured` sends the messages with the structured-output method the endpoint supports,
extracts JSON leniently with `json_objects` (the one JSON extractor of the project) (code fences, surrounding prose, small syntax slips via json-repair),
validates it with a pydantic model, retries once showing the model its validation error, and
otherwise reports failure so the caller applies its documented fallback and records it in the
trace. Every call's usage is counted, retries and failed parses included.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

import json_repair
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError

from recollect.llm.usage import call_record, estimate_tokens, merge_usage, mg_token_estimate
from recollect.prompts import render_prompt

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


class EndpointError(RuntimeError):
    """The chat endpoint could not be reached or kept failing after its retries."""


@dataclass
class StructuredResult(Generic[T]):
    value: T | None
    raw: str = ""
    attempts: int = 0
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    message: AIMessage | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None

    def failure_note(self) -> dict[str, Any]:
        """What a node puts in its trace record when it falls back."""
        return {"fallback": True, "error": (self.error or "")[:500], "raw": self.raw[:300]}


def json_objects(text: str) -> list[Any]:
    """Every top-level JSON object or array in a model reply, in order: the project's one JSON extractor.

    Code fences and surrounding prose are skipped (each `{` or `[` is tried as the start of a JSON
    value). When nothing parses, json-repair gets one try on the fenced block or the text from the
    first bracket, which rescues single quotes, trailing commas and replies cut at the token cap.
    """
    out: list[Any] = []
    if not text or not text.strip():
        return out
    decoder = json.JSONDecoder()
    i, n = 0, len(text)
    while i < n:
        starts = [k for k in (text.find("{", i), text.find("[", i)) if k >= 0]
        if not starts:
            break
        j = min(starts)
        try:
            obj, end = decoder.raw_decode(text, j)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: a reply nested deeper than Python parses
            i = j + 1
            continue
        if isinstance(obj, dict | list):
            out.append(obj)
        i = end
    if out:
        return out
    candidates = [m.strip() for m in _FENCE.findall(text)]
    starts = [k for k in (text.find("{"), text.find("[")) if k >= 0]
    if starts:
        candidates.append(text[min(starts):])
    for cand in candidates:
        try:
            repaired = json_repair.loads(cand)
        except Exception:  # json-repair is best effort; an unreadable piece is just skipped
            continue
        if isinstance(repaired, dict | list) and (repaired or cand.strip() in ("{}", "[]")):
            out.append(repaired)
            break
    return out


def extract_json(text: str) -> Any:
    """The JSON value a reply carries: its first object, else its first array (see `json_objects`)."""
    if not text or not text.strip():
        raise ValueError("empty reply")
    found = json_objects(text)
    if not found:
        raise ValueError("no JSON object found in the reply")
    return next((obj for obj in found if isinstance(obj, dict)), found[0])


def resolve_method(model: BaseChatModel, method: str) -> str:
    """Pick a structured-output method for this endpoint when the setting is `auto`.

    OpenAI enforces `json_schema`; llama.cpp accepts a `json_object` response format carrying a
    schema and constrains decoding with a grammar (but rejects `json_schema`); other servers
    (vLLM, Ollama, …) get plain JSON mode with the schema described in the prompt.
    """
    if method != "auto":
        return method
    preferred = getattr(model, "recollect_structured_method", None)
    if preferred:
        return str(preferred)
    base = str(getattr(model, "openai_api_base", None) or "")
    if type(model).__name__ in ("ChatOpenAI", "CompatChatOpenAI"):
        if not base or "api.openai.com" in base:
            return "json_schema"
        if "127.0.0.1" in base or "localhost" in base:
            return "json_object_schema"
    return "json_mode"


@lru_cache(maxsize=256)
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    return schema.model_json_schema()


def json_format_kwargs(schema: type[BaseModel], method: str) -> dict[str, Any]:
    """The `response_format` a JSON method sends (none for `function_calling` or an unknown method)."""
    if method == "json_schema":
        js = {"name": schema.__name__, "schema": _json_schema(schema), "strict": False}
        return {"response_format": {"type": "json_schema", "json_schema": js}}
    if method == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": _json_schema(schema)}}
    if method == "json_mode":
        return {"response_format": {"type": "json_object"}}
    return {}


def _bind(model: BaseChatModel, schema: type[BaseModel], method: str, max_tokens: int | None) -> Any:
    kwargs: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
    if method == "function_calling":
        tool = {"type": "function", "function": {"name": schema.__name__, "parameters": _json_schema(schema)}}
        return model.bind_tools([tool], tool_choice=schema.__name__, **kwargs)
    kwargs.update(json_format_kwargs(schema, method))
    return model.bind(**kwargs) if kwargs else model


def _reply_payload(msg: AIMessage) -> tuple[str, Any | None]:
    """The reply's text, plus the arguments of a forced function call when there is one."""
    text = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    if msg.tool_calls:
        return text, msg.tool_calls[0].get("args")
    return text, None


def measure_call(node: str, messages: list[BaseMessage], msg: AIMessage, latency: float) -> dict[str, Any]:
    prompt_text = "\n".join(m.content if isinstance(m.content, str) else json.dumps(m.content) for m in messages)
    completion_text = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    if msg.tool_calls:
        completion_text += _dumps([tc.get("args") for tc in msg.tool_calls])
    meta = msg.usage_metadata or {}
    estimated = not meta or not meta.get("input_tokens")
    prompt_tokens = estimate_tokens(prompt_text) if estimated else int(meta.get("input_tokens", 0))
    completion_tokens = estimate_tokens(completion_text) if estimated else int(meta.get("output_tokens", 0))
    return call_record(
        node,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_s=latency,
        estimated=estimated,
        mg_tokens=mg_token_estimate(prompt_text) + mg_token_estimate(completion_text),
        cached_tokens=int((meta.get("input_token_details") or {}).get("cache_read") or 0),
    )


def invoke_counted(
    model: Any, messages: list[BaseMessage], node: str, **kwargs: Any
) -> tuple[AIMessage, dict[str, Any]]:
    """One chat call with usage accounting; endpoint failures become `EndpointError`."""
    start = time.monotonic()
    try:
        msg = model.invoke(messages, **kwargs)
    except Exception as exc:  # the client already retried transient errors with backoff
        truncated = _truncated_reply(exc)
        if truncated is not None:
            return truncated, measure_call(node, messages, truncated, time.monotonic() - start)
        if _is_endpoint_failure(exc):
            raise EndpointError(f"LLM endpoint failed in node '{node}': {type(exc).__name__}: {exc}") from exc
        raise
    if not isinstance(msg, AIMessage):
        msg = AIMessage(content=str(getattr(msg, "content", msg)))
    return msg, measure_call(node, messages, msg, time.monotonic() - start)


def _truncated_reply(exc: Exception) -> AIMessage | None:
    """A reply cut at the completion cap: the client raises, but its text is often salvageable
    (json-repair closes the brackets), so it is returned as an ordinary, validated reply."""
    if type(exc).__name__ != "LengthFinishReasonError":
        return None
    completion = getattr(exc, "completion", None)
    try:
        text = completion.choices[0].message.content or ""  # type: ignore[union-attr]
        usage = completion.usage  # type: ignore[union-attr]
    except (AttributeError, IndexError):
        return AIMessage(content="")
    msg = AIMessage(content=text, response_metadata={"finish_reason": "length"})
    if usage is not None:
        msg.usage_metadata = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
                              "total_tokens": usage.total_tokens}
    return msg


def _is_endpoint_failure(exc: Exception) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(
        names
        & {
            "APIConnectionError",
            "APITimeoutError",
            "APIStatusError",
            "InternalServerError",
            "RateLimitError",
            "AuthenticationError",
            "NotFoundError",
            "ConnectError",
            "ConnectionError",
        }
    )


def call_structured(
    model: BaseChatModel,
    messages: list[BaseMessage],
    schema: type[T],
    *,
    node: str,
    method: str = "auto",
    max_tokens: int | None = 512,
) -> StructuredResult[T]:
    """Ask for a `schema` object; at most two calls (the second shows the validation error)."""
    bound = _bind(model, schema, resolve_method(model, method), max_tokens)
    convo = list(messages)
    result: StructuredResult[T] = StructuredResult(value=None)
    for attempt in (1, 2):
        msg, usage = invoke_counted(bound, convo, node)
        result.usage = merge_usage(result.usage, usage)
        result.attempts = attempt
        result.message = msg
        text, args = _reply_payload(msg)
        result.raw = text if args is None else _dumps(args)
        try:
            data = args if args is not None else extract_json(text)
            result.value = schema.model_validate(data)
            result.error = None
            return result
        except (ValidationError, ValueError, TypeError, RecursionError) as exc:
            result.error = _short_error(exc)
        if attempt == 1:
            convo = convo + [
                AIMessage(content=result.raw or "(empty reply)"),
                HumanMessage(content=render_prompt("common", "retry", error=result.error)),
            ]
    return result


def _dumps(args: Any) -> str:
    """Tool-call arguments as text for the trace and the retry; a structure too deep to print is named, not raised."""
    try:
        return json.dumps(args)
    except (RecursionError, TypeError, ValueError):
        return "(tool-call arguments too deeply nested to show)"


def _short_error(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "the reply is nested too deeply to read"
    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:5]]
        return "; ".join(parts)
    return str(exc)[:300]
