"""recollect's MCP endpoint, through a real MCP client (the `mcp` package's streamable HTTP client) against
`recollect serve` with an auth file: every graph is a described tool asking only for what a model writes,
answers come back as {answer, supports, method, cost}, `remember` is a tool, a forbidden call is an MCP tool
error (not an HTTP 500), an unnamed assistant is not `Untitled`, and a user reaches only its own namespaces.
One server for the module; a scripted model, no real one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from recollect.service.config import graph_specs
from tests.service.serving import serve_with_keys

pytestmark = [pytest.mark.service]
ALICE_KEY, BOB_KEY = "alice-key-mcp-0123456789", "bob-key-mcp-0123456789ab"
ACCOUNTS = {ALICE_KEY: {"user": "alice", "namespaces": ["alice", "alice-notes"]},
            BOB_KEY: {"user": "bob", "namespaces": ["bob"]}}
DOG = "What is the name of Maya's dog?"
ANSWERING = ["memr3", "rag", "full_context", "mragent", "hymem", "mgretrieval"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with serve_with_keys(tmp_path_factory.mktemp("mcp"), ACCOUNTS, ("alice", "bob")) as served:
        yield served


def _with_session(server: dict[str, Any], key: str, use: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run `use(session)` in an initialized MCP client session that sends `key`."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def go() -> Any:
        async with httpx2.AsyncClient(headers={"x-api-key": key}, timeout=120) as http, \
                streamable_http_client(server["url"] + "/mcp", http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            return await use(session)

    try:
        return asyncio.run(go())
    except BaseExceptionGroup as group:  # the client's task group: the error inside it
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup):
            inner = inner.exceptions[0]
        raise inner from None


def _tools(server: dict[str, Any], key: str) -> dict[str, Any]:
    async def use(session: Any) -> Any:
        return {t.name: t for t in (await session.list_tools()).tools}

    return _with_session(server, key, use)


def _call(server: dict[str, Any], key: str, name: str, arguments: dict[str, Any]) -> Any:
    async def use(session: Any) -> Any:
        return await session.call_tool(name, arguments)

    return _with_session(server, key, use)


def test_each_graph_is_a_described_tool_that_asks_only_for_what_a_model_writes(server: dict[str, Any]) -> None:
    tools = _tools(server, ALICE_KEY)
    specs = graph_specs()
    assert set(specs) <= set(tools) and {"remember", *ANSWERING} <= set(tools)
    for name, spec in specs.items():
        assert tools[name].description == spec["description"] and "Tool based on" not in tools[name].description
    for name in ANSWERING:
        schema = tools[name].input_schema
        assert set(schema["properties"]) == {"question", "namespace"} and schema["required"] == ["question"]
        assert schema["properties"]["namespace"]["enum"] == ["alice", "alice-notes"]  # alice's own, no other
        assert schema["properties"]["namespace"]["default"] == "alice"
        assert set(tools[name].output_schema["properties"]) == {"answer", "supports", "method", "cost"}
        assert tools[name].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True
    assert set(tools["remember"].input_schema["properties"]) == {"messages", "thread", "namespace"}
    for tool in tools.values():  # no tool takes a server path or lists what it returns
        props = set(tool.input_schema["properties"])
        assert not {p for p in props if p.endswith(("_path", "_dir", "_file", "_url")) or p == "path"}, tool.name
        assert not props & {"answer", "supports", "trace", "usage", "evidence"}, tool.name


def test_an_answer_is_the_answer_its_supports_method_and_cost(server: dict[str, Any]) -> None:
    result = _call(server, ALICE_KEY, "rag", {"question": DOG})
    assert result.is_error is False
    out = result.structured_content
    assert out["answer"] == "Biscuit" and out["method"] == "rag" and isinstance(out["supports"], list)
    assert out["cost"]["calls"] == 1 and out["cost"]["prompt_tokens"] > 0
    assert json.loads(result.content[0].text) == out


def test_a_forbidden_call_is_a_tool_error_and_users_reach_only_their_namespaces(server: dict[str, Any]) -> None:
    refused = _call(server, BOB_KEY, "rag", {"question": DOG, "namespace": "alice"})
    assert refused.is_error is True
    assert "forbidden" in refused.content[0].text and "may not use namespace 'alice'" in refused.content[0].text
    assert _tools(server, BOB_KEY)["rag"].input_schema["properties"]["namespace"]["enum"] == ["bob"]
    for name, arguments in (("forget", {"namespace": "alice"}), ("remember", {
            "namespace": "alice", "messages": [{"role": "user", "content": "hi"}]})):
        assert _call(server, BOB_KEY, name, arguments).is_error is True
    assert _call(server, ALICE_KEY, "rag", {"question": DOG}).structured_content["answer"] == "Biscuit"  # untouched
    unknown = _call(server, BOB_KEY, "rag", {"question": "   "})
    assert unknown.is_error is True and "question" in unknown.content[0].text
    log = server["log"].read_text()
    assert "POST /mcp 500" not in log and "service/mcp.py" not in log  # refused as a tool error, never a crash


def test_remember_is_a_tool_and_lands_in_the_callers_namespace(server: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": "My cat is called Tiger.", "id": "u1"},
                {"role": "assistant", "content": "Tiger, what a name!", "id": "a1"}]
    first = _call(server, ALICE_KEY, "remember", {"messages": messages, "thread": "chat-1", "namespace": "alice-notes"})
    assert first.is_error is False and first.structured_content["added"] == ["D1:1", "D1:2"]
    again = _call(server, ALICE_KEY, "remember", {"messages": messages, "thread": "chat-1", "namespace": "alice-notes"})
    assert again.structured_content == {"added": [], "skipped": 2, "queued": []}
    from langgraph_sdk import get_sync_client

    items = get_sync_client(url=server["url"], api_key=ALICE_KEY).store.search_items(
        ["recollect", "alice-notes", "turn"])["items"]
    assert sorted(i["value"]["text"] for i in items) == ["My cat is called Tiger.", "Tiger, what a name!"]
    assert _call(server, ALICE_KEY, "rag", {"question": "What is my cat called?", "namespace": "alice-notes"}
                 ).is_error is False


def test_an_unnamed_assistant_is_not_untitled_and_only_its_owner_sees_it(server: dict[str, Any]) -> None:
    from langgraph_sdk import get_sync_client

    alice = get_sync_client(url=server["url"], api_key=ALICE_KEY)
    made = alice.assistants.create("rag", context={"namespace": "alice"})
    assert made["name"] == "Untitled"  # what LangGraph calls it
    name = f"rag_{made['assistant_id'][:8]}"
    tools = _tools(server, ALICE_KEY)
    assert name in tools and "Untitled" not in tools
    assert "Your assistant" in tools[name].description
    assert _call(server, ALICE_KEY, name, {"question": DOG}).structured_content["answer"] == "Biscuit"
    assert name not in _tools(server, BOB_KEY)
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError, match="unknown tool"):  # no such tool for bob: an MCP error
        _call(server, BOB_KEY, name, {"question": DOG})


def test_without_a_key_the_endpoint_answers_401(server: dict[str, Any]) -> None:
    import httpx

    reply = httpx.post(server["url"] + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"accept": "application/json, text/event-stream"})
    assert reply.status_code == 401


def test_the_catalog_names_unnamed_assistants_and_asks_for_a_namespace_only_without_a_default() -> None:
    from recollect.service.mcp_tools import catalog, input_schema, namespace_property

    mine = [{"assistant_id": "0123456789abcdef", "graph_id": "rag", "name": "Untitled", "context": {}},
            {"assistant_id": "fedcba9876543210", "graph_id": "rag", "name": "Untitled"},
            {"assistant_id": "aaaaaaaa11111111", "graph_id": "memr3", "name": "memr3"},  # a graph's name is taken
            {"assistant_id": "bbbbbbbb22222222", "graph_id": "hymem", "name": "My notes!",
             "context": {"namespace": "team"}},
            {"assistant_id": "cccccccc33333333", "graph_id": "rag", "name": "rag", "metadata": {"created_by": "system"}}]
    tools = catalog(mine)
    assert {"rag_01234567", "rag_fedcba98", "memr3_aaaaaaaa", "My_notes"} <= set(tools)
    assert "Untitled" not in tools and tools["My_notes"].namespace == "team" and tools["rag"].assistant == "rag"
    anyone = namespace_property(None, None)  # auth off, no ?namespace=: the model must name it
    assert input_schema(tools["rag"], anyone)["required"] == ["question", "namespace"]
    fixed = namespace_property(None, "me")
    assert input_schema(tools["rag"], fixed)["required"] == ["question"] and fixed["default"] == "me"
