"""The `model` setting picks one of the endpoints the server configures (RECOLLECT_MODELS) by name: a run
uses the chosen one, an unknown name is an error naming the choices, a client can send neither a URL nor
a key, and an empty name keeps the default model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import recollect.llm.models as models
from recollect.graphs.registry import AllMethodsContext, context_class, load_graph
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel, scripted
from recollect.service.access import SERVER_ONLY_KEYS, is_server_only
from recollect.settings import Context, ContextError, get_settings
from tests.helpers import make_conversation

MODELS = {"small": {"base_url": "http://127.0.0.1:9/v1", "model": "small-1"},
          "large": {"base_url": "https://example.invalid/v1", "model": "large-2", "api_key_env": "LARGE_KEY"}}


@pytest.fixture
def endpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ScriptedChatModel]]:
    """RECOLLECT_MODELS with two names; the factory returns a scripted model per endpoint model name."""
    made: dict[str, ScriptedChatModel] = {}

    def factory(base_url: str, api_key: str, model: str, json_whitespace: str = "") -> ScriptedChatModel:
        made[model] = scripted(default={"answer": f"from {model} with key {api_key or '-'}", "supports": []})
        return made[model]

    monkeypatch.setenv("RECOLLECT_MODELS", json.dumps(MODELS))
    monkeypatch.setenv("LARGE_KEY", "sk-server-side")
    monkeypatch.setattr(models, "_openai", factory)
    monkeypatch.setattr(models, "_MODELS", {})
    get_settings.cache_clear()
    yield made
    get_settings.cache_clear()


def test_a_run_uses_the_named_endpoint(endpoints: dict[str, ScriptedChatModel], data_dir: str) -> None:
    conv = make_conversation([[("Ann", "my cat is called Pixel")]])
    ingest_conversation(conv, "pets", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    graph = load_graph("rag")
    for name, expected in (("large", "from large-2 with key sk-server-side"), ("small", "from small-1 with key -")):
        ctx = context_class("rag")(data_dir=data_dir, model=name)
        assert graph.invoke({"namespace": "pets", "question": "cat?"}, context=ctx)["answer"] == expected
    assert set(endpoints) == {"large-2", "small-1"} and all(len(m.calls) == 1 for m in endpoints.values())


def test_aux_role_follows_the_choice_unless_an_aux_endpoint_is_set(endpoints: dict[str, Any],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Context(model="small")
    assert models.get_chat_model(ctx, role="aux") is models.get_chat_model(ctx) is endpoints["small-1"]
    monkeypatch.setenv("RECOLLECT_AUX_LLM_BASE_URL", "http://127.0.0.1:9/aux")
    monkeypatch.setenv("RECOLLECT_AUX_LLM_MODEL", "keywords")
    get_settings.cache_clear()
    assert models.get_chat_model(ctx, role="aux") is endpoints["keywords"]


def test_an_unknown_name_fails_the_run_naming_the_choices(endpoints: dict[str, Any], data_dir: str) -> None:
    conv = make_conversation([[("Ann", "my cat is called Pixel")]])
    ingest_conversation(conv, "pets", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    injected = scripted(default={"answer": "x", "supports": []})
    ctx = context_class("rag")(data_dir=data_dir, model="medium", chat_model=injected)
    with pytest.raises(ContextError, match=r"setting model: unknown model 'medium'; configured models: large, small"):
        load_graph("rag").invoke({"namespace": "pets", "question": "cat?"}, context=ctx)
    assert injected.calls == []  # failed before any call, even with a model injected


def test_no_configured_models_and_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECOLLECT_MODELS", raising=False)
    get_settings.cache_clear()
    with pytest.raises(ContextError, match="configured models: none: RECOLLECT_MODELS is not set"):
        models.get_chat_model(Context(model="large"))
    injected = scripted()
    assert models.get_chat_model(Context(chat_model=injected)) is injected  # "" = today's model
    assert models.model_entry("") is None


def test_clients_name_a_model_never_a_url_or_a_key() -> None:
    with pytest.raises(ContextError, match="setting model: must match"):
        Context(model="http://attacker.example/v1")
    assert not is_server_only("model") and not is_server_only("rewrite_followups")
    assert "models" in SERVER_ONLY_KEYS  # the endpoints themselves are the server's configuration
    for method in ("memr3", "rag", "mgretrieval"):
        props = load_graph(method).get_context_jsonschema()["properties"]
        assert {"model", "rewrite_followups"} <= set(props), method


@pytest.mark.parametrize(("raw", "message"), [
    ("{not json", "RECOLLECT_MODELS is not JSON"),
    ('["a"]', "must be a JSON object"),
    ('{"a b": {"model": "m"}}', "a name is 1-64 letters"),
    ('{"a": {"model": "m", "api_key": "sk-1"}}', "an object of strings with keys api_key_env, base_url, model"),
    ('{"a": {"base_url": "http://x"}}', "'model' is required"),
])
def test_a_bad_models_setting_is_a_clear_error(raw: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECOLLECT_MODELS", raw)
    get_settings.cache_clear()
    try:
        with pytest.raises(ValueError, match=message) as raised:
            models.get_chat_model(Context(model="a"))
        assert "sk-1" not in str(raised.value)
    finally:
        get_settings.cache_clear()


def test_a_missing_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECOLLECT_MODELS", json.dumps(MODELS))
    monkeypatch.delenv("LARGE_KEY", raising=False)
    monkeypatch.setattr(models, "_MODELS", {})
    get_settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="the environment variable LARGE_KEY holding its key is not set"):
            models.get_chat_model(Context(model="large"))
        real = models.get_chat_model(Context(model="small"))  # the real client: built, never called
        assert real.model_name == "small-1" and str(real.openai_api_base) == "http://127.0.0.1:9/v1"
        assert real.disable_streaming is True  # a `messages` stream never turns its calls into streamed requests
    finally:
        get_settings.cache_clear()
