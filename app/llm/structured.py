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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

import json_repair
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.constants import TAG_NOSTREAM
from pydantic import BaseModel, ValidationError

from recollect.llm.usage import call_record, estimate_tokens, merge_usage, mg_token_estimate
from recollect.prompts import render_prompt

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_OPEN = re.compile(r"[{\[]")
# A reply is untrusted text, so the work it may cost is bounded (100k brackets once took minutes):
_MAX_FAILED_STARTS = 200  # brackets that start no JSON value; a real reply has a handful
_REPAIR_MAX_CHARS = 16_000  # json-repair is pure Python and superlinear; no completion cap we send reaches this
_REPAIR_MAX_DEPTH = 64  # nor a nesting this deep, where json-repair slows down most
_SURROGATE = re.compile("[\ud800-\udfff]")
# JSON text: an escaped backslash (kept, so what follows is no escape), a surrogate pair (kept), a lone one.
_SURROGATE_ESCAPE = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


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


def clean_text(text: str) -> str:
    """`text` with each lone UTF-16 surrogate replaced by U+FFFD: a reply's JSON may escape one
    (`"\\ud800"`), and SQLite, Chroma and a UTF-8 terminal all refuse to encode it."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _clean_escapes(text: str) -> str:
    """JSON text whose `\\uXXXX` escapes decode to no lone surrogate (a valid pair is kept)."""
    if "\\u" not in text:
        return text
    return _SURROGATE_ESCAPE.sub(lambda m: m[0] if len(m[0]) != 6 else "\\ufffd", text)


def _too_deep(text: str) -> bool:
    depth = 0
    for ch in text:
        if ch in "{[":
            depth += 1
            if depth > _REPAIR_MAX_DEPTH:
                return True
        elif ch in "}]" and depth:
            depth -= 1
    return False


def json_objects(text: str) -> list[Any]:
    """Every top-level JSON object or array in a model reply, in order: the project's one JSON extractor.

    Code fences and surrounding prose are skipped (each `{` or `[` is tried as the start of a JSON
    value, up to `_MAX_FAILED_STARTS` that start none). When nothing parses, json-repair gets one try
    on the fenced block or the text from the first bracket, which rescues single quotes, trailing
    commas and replies cut at the token cap (not on a piece too long or too deep to be one of those).
    Lone surrogates come out as U+FFFD.
    """
    out: list[Any] = []
    if not text or not text.strip():
        return out
    text = _clean_escapes(clean_text(text))
    decoder = json.JSONDecoder()
    i, failed = 0, 0
    while failed < _MAX_FAILED_STARTS and (found := _OPEN.search(text, i)) is not None:
        j = found.start()
        try:
            obj, end = decoder.raw_decode(text, j)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: a reply nested deeper than Python parses
            i, failed = j + 1, failed + 1
            continue
        if isinstance(obj, dict | list):
            out.append(obj)
        i = end
    if out:
        return out
    candidates = [m.strip() for m in _FENCE.findall(text)]
    if (first := _OPEN.search(text)) is not None:
        candidates.append(text[first.start():])
    for cand in candidates:
        if len(cand) > _REPAIR_MAX_CHARS or _too_deep(cand):
            continue
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
    meta: Mapping[str, Any] = msg.usage_metadata or {}
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
        server_timings=(msg.response_metadata or {}).get("timings"),
    )


def invoke_counted(
    model: Any, messages: list[BaseMessage], node: str, **kwargs: Any
) -> tuple[AIMessage, dict[str, Any]]:
    """One chat call with usage accounting; endpoint failures become `EndpointError`, a reply the client
    could not read an empty one whose `response_metadata["reply_error"]` says why."""
    start = time.monotonic()
    try:
        # Tagged so LangGraph's `messages` stream never sends these internal replies (JSON, tool calls) to a
        # chat client: a graph's answer reaches it as the message finish_question appends.
        msg = model.invoke(messages, config={"tags": [TAG_NOSTREAM]}, **kwargs)
    except Exception as exc:  # the client already retried transient errors with backoff
        truncated = _truncated_reply(exc)
        if truncated is not None:
            return truncated, measure_call(node, messages, truncated, time.monotonic() - start)
        if _is_endpoint_failure(exc):
            raise EndpointError(f"LLM endpoint failed in node '{node}': {type(exc).__name__}: {exc}") from exc
        unreadable = _unreadable_reply(exc)
        if unreadable is None:
            raise
        return unreadable, measure_call(node, messages, unreadable, time.monotonic() - start)
    if not isinstance(msg, AIMessage):
        msg = AIMessage(content=str(getattr(msg, "content", msg)))
    return _clean_message(msg), measure_call(node, messages, msg, time.monotonic() - start)


# What a chat client raises when a reply arrived but cannot be read: an error or no choices in the body,
# a refused or filtered completion, arguments nested too deep. Such a reply fails like an unparsable one
# (the node falls back and its trace says why); anything else, a bug or a test's assertion, propagates.
_REPLY_ERRORS = (ValueError, KeyError, TypeError, RecursionError)
_REPLY_ERROR_NAMES = {"ContentFilterFinishReasonError", "APIResponseValidationError"}


def _unreadable_reply(exc: Exception) -> AIMessage | None:
    if not isinstance(exc, _REPLY_ERRORS) and not {c.__name__ for c in type(exc).__mro__} & _REPLY_ERROR_NAMES:
        return None
    why = clean_text(f"the reply could not be read: {type(exc).__name__}: {exc}")[:300]
    return AIMessage(content="", response_metadata={"reply_error": why})


def _clean_message(msg: AIMessage) -> AIMessage:
    """The reply with no lone surrogate in its text or tool-call arguments (see `clean_text`)."""
    if isinstance(msg.content, str):
        msg.content = clean_text(msg.content)
    for call in msg.tool_calls or []:
        try:
            call["args"] = json.loads(_clean_escapes(json.dumps(call.get("args"))))
        except (RecursionError, TypeError, ValueError):  # too deep to print: validation rejects it anyway
            continue
    return msg


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
    check: Callable[[T], str | None] | None = None,
) -> StructuredResult[T]:
    """Ask for a `schema` object; at most two calls (the second shows the validation error).

    `check` judges a reply that fits the schema against what was asked (a builder's batch of turns): a
    reason it returns fails the reply like a validation error, so an empty reply gets its retry and then
    counts as failed."""
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
            if msg.response_metadata.get("reply_error"):
                raise ValueError(msg.response_metadata["reply_error"])
            data = args if args is not None else extract_json(text)
            value = schema.model_validate(data)
            problem = check(value) if check is not None else None
            if problem:
                raise ValueError(problem)
            result.value = value
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
