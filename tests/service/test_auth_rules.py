"""The auth handlers' rules without a server: the auth file, 401s, server-only keys, namespace checks,
thread binding, ownership filters, the store, and the config and options `recollect serve` starts with.
(tests/service/test_auth.py checks the same against a real server.)"""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import Auth

from recollect.service import auth as handlers
from recollect.service.access import (
    SERVER_ONLY_KEYS,
    AccessError,
    Account,
    AuthFileError,
    check_run_payload,
    key_digest,
    load_auth_file,
    run_namespaces,
)
from recollect.service.config import AUTH_PATH, HTTP_APP, graph_specs, registry, write_server_config
from recollect.service.serve import is_loopback

KEY = "alice-key-0123456789abcdef"
ALICE = Account(user="alice", namespaces=frozenset({"alice", "team"}))


class User:
    """What LangGraph hands a handler: the dict `authenticate` returned, as attributes."""

    def __init__(self, identity: str, namespaces: list[str] | None = None) -> None:
        self.identity = identity
        if namespaces is not None:
            self.namespaces = namespaces


def _ctx(resource: str, action: str, user: User | None = None) -> Auth.types.AuthContext:
    return Auth.types.AuthContext(user=user or User("alice", ["alice", "team"]), permissions=[],
                                  resource=resource, action=action)  # type: ignore[arg-type]


def _refusal(coro: Any) -> tuple[int, str]:
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        asyncio.run(coro)
    return refused.value.status_code, str(refused.value.detail)


@pytest.fixture
def auth_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "accounts", lambda: {key_digest(KEY): ALICE})


@pytest.fixture
def auth_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "accounts", lambda: None)


def _thread_holds(monkeypatch: pytest.MonkeyPatch, values: Any) -> None:
    async def read(_thread_id: Any) -> Any:
        return values

    monkeypatch.setattr(handlers, "_thread_values", read)


# --- the auth file -----------------------------------------------------------------------------------


def test_auth_file_maps_key_digests_to_accounts(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({KEY: {"user": "alice", "namespaces": ["alice", "team"]}}))
    assert load_auth_file(path) == {key_digest(KEY): ALICE}


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not valid JSON at line 1"),
    ("[]", "expected a non-empty JSON object"),
    (json.dumps({"short-key": {"user": "a", "namespaces": ["a"]}}), "entry 1: the API key must be at least 16"),
    (json.dumps({KEY: {"user": "", "namespaces": ["a"]}}), "'user' must be a non-empty string"),
    (json.dumps({KEY: {"user": "a", "namespaces": []}}), "'namespaces' must be a non-empty list"),
    (json.dumps({KEY: {"user": "a", "namespaces": ["a"], "admin": True}}), "unknown field(s) admin"),
    (json.dumps({KEY: ["a"]}), "expected an object with 'user' and 'namespaces'"),
])
def test_a_bad_auth_file_is_one_clear_error_without_keys(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(content)
    with pytest.raises(AuthFileError, match=message.replace("(", r"\(").replace(")", r"\)")) as bad:
        load_auth_file(path)
    assert KEY not in str(bad.value) and "short-key" not in str(bad.value) and str(path) in str(bad.value)
    with pytest.raises(AuthFileError, match="cannot read it"):
        load_auth_file(tmp_path / "missing.json")


# --- authentication ----------------------------------------------------------------------------------


def test_authenticate_needs_a_known_key(auth_on: None) -> None:
    assert _refusal(handlers.authenticate({}))[0] == 401
    assert "x-api-key" in _refusal(handlers.authenticate({b"x-api-key": b"  "}))[1]
    assert _refusal(handlers.authenticate({b"x-api-key": b"wrong-key-0123456789abcdef"})) == (401, "unknown API key")
    user = asyncio.run(handlers.authenticate({b"x-api-key": KEY.encode()}))
    assert user == {"identity": "alice", "namespaces": ["alice", "team"]}


def test_without_an_auth_file_everyone_is_the_local_user(auth_off: None) -> None:
    assert asyncio.run(handlers.authenticate({})) == {"identity": handlers.LOCAL_USER}


# --- server-only keys and what a run names -------------------------------------------------------------


@pytest.mark.parametrize("key", ["data_dir", "cache_dir", "llm_base_url", "llm_api_key", "aux_llm_model",
                                 "judge_api_key", "auth_file", "embedder", "chat_model", "retriever",
                                 "some_new_dir", "index_path", "endpoint_url"])
def test_server_configuration_in_a_run_is_refused(key: str) -> None:
    for kwargs in ({"context": {key: "x"}}, {"config": {"configurable": {key: "x"}}}):
        with pytest.raises(AccessError, match=f"may not set {key}") as refused:
            check_run_payload(kwargs, restricted=False)
        assert refused.value.status == 400


def test_run_settings_and_namespaces_pass() -> None:
    kwargs = {"input": {"namespace": "a", "question": "q"}, "context": {"rag_top_k": 3, "namespace": "b"},
              "command": {"update": [["namespace", "c"]]}}
    named = check_run_payload(kwargs, restricted=False)
    assert named.input == {"a", "c"} and named.settings == {"b"}
    assert run_namespaces({"input": {"messages": []}}).all == frozenset()
    with pytest.raises(AccessError, match="namespace must be a string"):
        run_namespaces({"input": {"namespace": ["a"]}})
    with pytest.raises(AccessError, match="may only resume") as refused:
        check_run_payload({"command": {"goto": "answer"}}, restricted=True)
    assert refused.value.status == 403


def test_every_served_graph_schema_leaves_out_server_and_python_only_fields() -> None:
    for name, spec in graph_specs().items():
        module, attr = spec["path"].split(":")
        schema = getattr(importlib.import_module(module), attr).get_context_jsonschema()
        props = set(schema["properties"])
        assert props and not props & SERVER_ONLY_KEYS, (name, props & SERVER_ONLY_KEYS)


# --- runs: binding, namespaces, ownership ----------------------------------------------------------------


def test_runs_without_auth_are_checked_for_configuration_and_binding(auth_off: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _thread_holds(monkeypatch, {"namespace": "svc"})
    run = {"thread_id": "t1", "metadata": {}, "kwargs": {"input": {"namespace": "other", "question": "q"}}}
    status, detail = _refusal(handlers.on_run(ctx=_ctx("threads", "create_run"), value=run))
    assert status == 409 and "thread t1 reads namespace 'svc'" in detail and "start a new thread" in detail
    same = {"thread_id": "t1", "metadata": {}, "kwargs": {"input": {"namespace": "svc", "question": "q"},
                                                          "context": {"namespace": "anything"}}}
    assert asyncio.run(handlers.on_run(ctx=_ctx("threads", "create_run"), value=same)) is None
    bad = {"thread_id": None, "kwargs": {"context": {"data_dir": "/tmp/x"}}}
    assert _refusal(handlers.on_run(ctx=_ctx("threads", "create_run"), value=bad))[0] == 400


def test_runs_with_auth_name_only_the_callers_namespaces_and_are_owned(auth_on: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _thread_holds(monkeypatch, None)
    ctx = _ctx("threads", "create_run")
    for kwargs in ({"input": {"namespace": "bob", "question": "q"}}, {"context": {"namespace": "bob"}},
                   {"config": {"configurable": {"namespace": "bob"}}}):
        status, detail = _refusal(handlers.on_run(ctx=ctx, value={"thread_id": None, "metadata": {}, "kwargs": kwargs}))
        assert (status, detail) == (403, "user 'alice' may not use namespace 'bob'")
    run = {"thread_id": None, "metadata": {"owner": "bob"}, "kwargs": {"input": {"namespace": "team"}}}
    assert asyncio.run(handlers.on_run(ctx=ctx, value=run)) == {"owner": "alice"}
    assert run["metadata"]["owner"] == "alice"
    # a thread reading a namespace the caller lost is refused too
    _thread_holds(monkeypatch, {"namespace": "old"})
    chat = {"thread_id": "t1", "metadata": {}, "kwargs": {"input": {"messages": []}}}
    assert _refusal(handlers.on_run(ctx=ctx, value=chat))[0] == 403
    # a user this module did not authenticate has no namespace
    stranger = _ctx("threads", "create_run", User("langgraph-studio-user"))
    _thread_holds(monkeypatch, None)
    assert _refusal(handlers.on_run(ctx=stranger, value=run))[0] == 403


def test_threads_and_assistants_belong_to_their_creator(auth_on: None) -> None:
    created = {"thread_id": "t", "metadata": {"owner": "bob"}}
    assert asyncio.run(handlers.on_thread_create(ctx=_ctx("threads", "create"), value=created)) == {"owner": "alice"}
    assert created["metadata"]["owner"] == "alice"
    for action in ("read", "delete"):
        assert asyncio.run(handlers.on_thread_access(ctx=_ctx("threads", action), value={})) == {"owner": "alice"}
    search = handlers.on_thread_search(ctx=_ctx("threads", "search"), value={"values": {"namespace": "team"}})
    assert asyncio.run(search) == {"owner": "alice"}
    foreign = handlers.on_thread_search(ctx=_ctx("threads", "search"), value={"values": {"namespace": "bob"}})
    assert _refusal(foreign)[0] == 403
    assert _refusal(handlers.on_thread_update(ctx=_ctx("threads", "update"), value={"thread_id": "t"}))[0] == 403
    patched = {"thread_id": "t", "metadata": {"owner": "bob"}}
    assert asyncio.run(handlers.on_thread_update(ctx=_ctx("threads", "update"), value=patched)) == {"owner": "alice"}
    assert patched["metadata"] == {"owner": "alice"}

    made = {"graph_id": "rag", "context": {"namespace": "team"}, "metadata": {"created_by": "system"}}
    assert asyncio.run(handlers.on_assistant_write(ctx=_ctx("assistants", "create"), value=made)) == {"owner": "alice"}
    assert made["metadata"] == {"owner": "alice"}  # nobody makes an assistant look like the server's own
    elsewhere = {"graph_id": "rag", "context": {"namespace": "bob"}, "metadata": {}}
    assert _refusal(handlers.on_assistant_write(ctx=_ctx("assistants", "create"), value=elsewhere))[0] == 403
    assert asyncio.run(handlers.on_assistant_read(ctx=_ctx("assistants", "search"), value={})) == {
        "$or": [{"owner": "alice"}, {"created_by": "system"}]}


def test_without_auth_nothing_is_filtered_but_configuration_is_refused(auth_off: None) -> None:
    assert asyncio.run(handlers.on_thread_search(ctx=_ctx("threads", "search"), value={})) is None
    assert asyncio.run(handlers.on_assistant_read(ctx=_ctx("assistants", "read"), value={})) is None
    assert asyncio.run(handlers.on_store(ctx=_ctx("store", "search"), value={"namespace": ()})) is None
    bad = {"graph_id": "rag", "config": {"configurable": {"data_dir": "/x"}}, "metadata": {}}
    assert _refusal(handlers.on_assistant_write(ctx=_ctx("assistants", "update"), value=bad))[0] == 400
    cron = {"payload": {"context": {"llm_base_url": "http://x"}}}
    assert _refusal(handlers.everything_else(ctx=_ctx("crons", "create"), value=cron))[0] == 400


def test_store_items_live_under_the_callers_namespaces(auth_on: None) -> None:
    assert asyncio.run(handlers.on_store(ctx=_ctx("store", "put"), value={"namespace": ("team", "notes")})) is None
    for namespace in (("bob",), (), None, ("",)):
        status, detail = _refusal(handlers.on_store(ctx=_ctx("store", "get"), value={"namespace": namespace}))
        assert status == 403 and "one of your namespaces" in detail


def test_recollect_memories_are_readable_by_their_namespace_only(auth_on: None) -> None:
    def on_store(action: str, namespace: tuple[str, ...]) -> Any:
        return handlers.on_store(ctx=_ctx("store", action), value={"namespace": namespace})

    for action in ("get", "search", "list_namespaces"):
        assert asyncio.run(on_store(action, ("recollect", "team", "turn"))) is None
        assert asyncio.run(on_store(action, ("recollect", "team"))) is None
    for namespace in (("recollect",), ("recollect", "bob"), ("recollect", "%global", "namespace")):
        status, detail = _refusal(on_store("search", namespace))
        assert status == 403 and "one of your namespaces" in detail
    for action in ("put", "delete"):  # memories change through ingest and forget only
        status, detail = _refusal(on_store(action, ("recollect", "team", "turn")))
        assert status == 403 and "read-only" in detail


def test_requests_no_rule_covers_are_refused_with_auth(auth_on: None) -> None:
    assert _refusal(handlers.everything_else(ctx=_ctx("crons", "create"), value={}))[0] == 403


# --- what `recollect serve` starts with -----------------------------------------------------------------


def test_the_server_config_always_installs_the_handlers(tmp_path: Path) -> None:
    off = json.loads(write_server_config(tmp_path / "a").read_text())
    on = json.loads(write_server_config(tmp_path / "b", auth_on=True).read_text())
    assert off["auth"] == {"path": AUTH_PATH, "disable_studio_auth": False}
    assert on["auth"] == {"path": AUTH_PATH, "disable_studio_auth": True}
    # the key check before every route but /ok, and recollect's MCP endpoint in place of LangGraph's
    assert off["http"] == on["http"] == {"app": HTTP_APP, "enable_custom_route_auth": True, "disable_mcp": True}
    assert registry()["auth"]["path"] == AUTH_PATH  # `langgraph dev` in the checkout gets them too


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.org"))
