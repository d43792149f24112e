"""Chat-model factory: any OpenAI-compatible endpoint from settings, else the embedded model.

With no `RECOLLECT_LLM_BASE_URL`, the first request for a model starts the local llama.cpp
server on a free 127.0.0.1 port (stopped when the process exits). Models are cached per process.
A run's `model` setting picks one of the endpoints the server names in `RECOLLECT_MODELS`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from functools import lru_cache
from typing import Any

from langchain_core.language_models import BaseChatModel

from recollect.settings import Context, ContextError, get_settings

_LOCK = threading.Lock()
_MODELS: dict[str, BaseChatModel] = {}
_SERVER: Any = None


def _compat_class() -> type:
    from langchain_openai import ChatOpenAI

    class CompatChatOpenAI(ChatOpenAI):
        """ChatOpenAI that also sends the legacy `max_tokens` to servers other than OpenAI.

        langchain-openai renames `max_tokens` to `max_completion_tokens`, which llama.cpp's server
        (and some other OpenAI-compatible servers) silently ignore: a reply then runs on until the
        context is full. OpenAI itself gets the payload unchanged.
        """

        # The embedded xllamacpp server's model only: a key of JSON_WHITESPACE (settings.local_json_whitespace).
        recollect_json_whitespace: str = ""
        # The embedded server's slots (settings.local_parallel); above 1, each run's calls are pinned to one.
        recollect_slots: int = 0

        def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
            payload = super()._get_request_payload(input_, stop=stop, **kwargs)
            base = str(self.openai_api_base or "")
            if base and "api.openai.com" not in base and "max_completion_tokens" in payload:
                payload["max_tokens"] = payload["max_completion_tokens"]
            if self.recollect_json_whitespace in JSON_WHITESPACE:
                json_grammar(payload, JSON_WHITESPACE[self.recollect_json_whitespace])
            if self.recollect_slots > 1 and (slot := run_slot(self.recollect_slots)) is not None:
                # llama.cpp's `id_slot`: the run's calls stay on one slot, whose KV holds its previous prompt.
                payload["extra_body"] = {**(payload.get("extra_body") or {}), "id_slot": slot}
            return payload

        def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> Any:
            result = super()._create_chat_result(response, generation_info)
            # llama.cpp's server times each request (`timings`: prompt_ms, predicted_ms, prompt_n, cache_n),
            # a field the OpenAI schema does not have; kept on the message so usage accounting can split
            # a call's seconds into prefill and decode.
            raw = response.get("timings") if isinstance(response, dict) else (getattr(response, "model_extra", None) or {}).get("timings")
            if isinstance(raw, dict):
                for gen in result.generations:
                    gen.message.response_metadata["timings"] = {k: raw[k] for k in SERVER_TIMINGS if k in raw}
            return result

    return CompatChatOpenAI


# The fields of llama.cpp's per-request `timings` kept with a reply (milliseconds and token counts).
SERVER_TIMINGS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n")


# llguidance's JSON whitespace options (read at the schema's top level only). compact: no free whitespace,
# one space after ':' and ','. single_space: at most one space between JSON tokens, anywhere, which is
# the grammar of the llama-cpp-python runtime (its JSON schema converter's `space ::= " "?`).
JSON_WHITESPACE: dict[str, dict[str, Any]] = {
    "compact": {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "},
    "single_space": {"whitespace_pattern": " "},
}


def json_grammar(payload: dict[str, Any], options: dict[str, Any]) -> None:
    """Turn a `json_object` + schema response format into an llguidance grammar with these whitespace options.

    llama.cpp built with llguidance (the xllamacpp wheel is) reads a `grammar` that starts with
    `%llguidance`; `%json` there takes a JSON schema whose top-level `x-guidance` sets the separators.
    A payload without a schema (plain JSON mode, tool calls) is left as it is.
    """
    fmt = payload.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_object" or not isinstance(fmt.get("schema"), dict):
        return
    schema = {**fmt["schema"], "x-guidance": options}
    payload.pop("response_format")
    # Not an OpenAI parameter: the client passes `extra_body` through into the request JSON.
    payload["extra_body"] = {**(payload.get("extra_body") or {}),
                             "grammar": "%llguidance {}\nstart: %json " + json.dumps(schema)}


_SLOTS: dict[str, int] = {}  # thread id -> slot, newest last (bounded)
_SLOTS_KEPT = 4096
_next_slot = 0


def run_slot(slots: int) -> int | None:
    """The slot of the graph run this call belongs to, by its thread id; None outside a run.

    A question's calls share a prefix (graphs/memr3/layout.py, graphs/mragent/prompting.py) that llama.cpp
    keeps in the KV of the slot that served the last call. Without `id_slot` the server picks the idle slot
    whose prompt is most similar, which another run's call may hold by then when several run at once. New
    runs get the slots in turn, so runs started together spread over the slots.
    """
    global _next_slot
    try:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:  # not inside a graph run (a builder's batch, a benchmark's direct call)
        return None
    if not thread:
        return None
    key = str(thread)
    with _LOCK:
        if key not in _SLOTS:
            _SLOTS[key] = _next_slot % slots
            _next_slot += 1
            while len(_SLOTS) > _SLOTS_KEPT:
                _SLOTS.pop(next(iter(_SLOTS)))
        return _SLOTS[key] % slots


def _openai(base_url: str, api_key: str, model: str, json_whitespace: str = "", slots: int = 0) -> BaseChatModel:
    s = get_settings()
    return _compat_class()(
        base_url=base_url or None,
        api_key=api_key or "not-needed",
        model=model or "gpt-4o-mini",
        temperature=s.llm_temperature,
        timeout=s.llm_timeout_s,
        max_retries=s.llm_max_retries,  # the OpenAI client backs off exponentially on transient errors
        max_tokens=s.llm_max_tokens,
        stream_usage=True,
        # Every reply is read whole (parsed and validated) and none is shown as it comes: without this, the
        # callback of LangGraph's `messages` stream would switch each call to a streamed request.
        disable_streaming=True,
        recollect_json_whitespace=json_whitespace,
        recollect_slots=slots,
    )


def local_server() -> Any:
    """Start (once) and return the embedded llama.cpp server."""
    global _SERVER
    from recollect.llm.local_runtime import LocalServer

    with _LOCK:
        if _SERVER is None or _SERVER.proc is None or _SERVER.proc.poll() is not None:
            _SERVER = LocalServer().start()
        return _SERVER


def stop_local_server() -> None:
    global _SERVER
    with _LOCK:
        if _SERVER is not None:
            _SERVER.stop()
            _SERVER = None
        _MODELS.pop("local", None)


def default_chat_model() -> BaseChatModel:
    s = get_settings()
    key = "remote" if s.llm_base_url else "local"
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
    if s.llm_base_url:
        model = _openai(s.llm_base_url, s.llm_api_key, s.llm_model)
    else:
        server = local_server()
        ws = s.local_json_whitespace if server.runtime == "xllamacpp" else ""
        # Only the embedded llama.cpp server gets `id_slot`: another endpoint may reject a field it does not know.
        slots = s.local_parallel if server.runtime == "xllamacpp" else 0
        model = _openai(server.base_url, "local", server.spec.alias, json_whitespace=ws, slots=slots)
    with _LOCK:
        _MODELS[key] = model
    return model


def aux_chat_model() -> BaseChatModel:
    s = get_settings()
    if not s.aux_llm_base_url:
        return default_chat_model()
    with _LOCK:
        if "aux" not in _MODELS:
            _MODELS["aux"] = _openai(s.aux_llm_base_url, s.aux_llm_api_key, s.aux_llm_model)
        return _MODELS["aux"]


_MODEL_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")  # the `model` setting's pattern (recollect.settings)
_ENTRY_KEYS = frozenset({"base_url", "model", "api_key_env"})


@lru_cache(maxsize=4)
def _parse_models(raw: str) -> dict[str, dict[str, str]]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"RECOLLECT_MODELS is not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(data, dict):
        raise ValueError('RECOLLECT_MODELS must be a JSON object {"<name>": {"base_url", "model", "api_key_env"}}')
    out: dict[str, dict[str, str]] = {}
    for name, entry in data.items():
        where = f"RECOLLECT_MODELS[{name!r}]"
        if not _MODEL_NAME.fullmatch(name):
            raise ValueError(f"{where}: a name is 1-64 letters, digits, '.', '_' or '-'")
        if not isinstance(entry, dict) or set(entry) - _ENTRY_KEYS or not all(isinstance(v, str) for v in entry.values()):
            raise ValueError(f"{where}: an object of strings with keys {', '.join(sorted(_ENTRY_KEYS))} (a key is "
                             "read from the environment variable api_key_env names, never written here)")
        if not entry.get("model"):
            raise ValueError(f"{where}: 'model' is required")
        out[name] = {key: entry.get(key, "") for key in sorted(_ENTRY_KEYS)}
    return out


def configured_models() -> dict[str, dict[str, str]]:
    """The server's named endpoints (`RECOLLECT_MODELS`): {name: {"base_url", "model", "api_key_env"}}."""
    return _parse_models(get_settings().models)


def model_entry(name: str) -> dict[str, str] | None:
    """The endpoint the `model` setting names (None for "": the default model); an unknown name is a
    `ContextError` naming the choices. Clients send a name only, so they never pick a URL or a key."""
    if not name:
        return None
    known = configured_models()
    if name not in known:
        choices = ", ".join(sorted(known)) or "none: RECOLLECT_MODELS is not set"
        raise ContextError(f"setting model: unknown model {name!r}; configured models: {choices} "
                           "(leave it empty for the default model)")
    return known[name]


def named_chat_model(name: str) -> BaseChatModel:
    """The chat model for a `model` setting: a configured endpoint, or the default one for ""."""
    entry = model_entry(name)
    if entry is None:
        return default_chat_model()
    key = f"named:{name}:{json.dumps(entry, sort_keys=True)}"
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
    env = entry["api_key_env"]
    if env and not os.environ.get(env):
        raise ValueError(f"RECOLLECT_MODELS[{name!r}]: the environment variable {env} holding its key is not set")
    model = _openai(entry["base_url"], os.environ.get(env, "") if env else "", entry["model"])
    with _LOCK:
        return _MODELS.setdefault(key, model)


def get_chat_model(ctx: Context, role: str = "main") -> BaseChatModel:
    """The model for a node: an injected one from the context, else the endpoint the `model` setting
    names, else the configured default. The auxiliary role keeps its own endpoint when one is set."""
    name = ctx.model
    model_entry(name)  # an unknown name fails even when a model is injected: a typo never passes silently
    if role == "aux":
        if ctx.aux_chat_model or ctx.chat_model:
            return ctx.aux_chat_model or ctx.chat_model
        return aux_chat_model() if get_settings().aux_llm_base_url else named_chat_model(name)
    return ctx.chat_model or named_chat_model(name)


def model_name(model: Any) -> str:
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)
