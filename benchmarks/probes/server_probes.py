"""Probes of `recollect serve` over HTTP (the LangGraph SDK and raw requests) and its MCP endpoint: one
server with an auth file and two users, one without auth, each on its own fresh data directory, both
answering with the scripted endpoint the runner started."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.probes.common import Tally, dialogue

SURFACE, MCP = "server", "mcp"
ALICE, BOB = "probe-alice-0123456789abcdef", "probe-bob-0123456789abcdef"
ASK = {"namespace": "alice", "question": "What is the cat called?"}
MISSING = "00000000-0000-4000-8000-000000000000"


@contextmanager
def serving(data: Path, base_url: str, **env: str) -> Iterator[tuple[str, Path]]:
    from tests.service.serving import start_serve, stop_serve

    data.mkdir(parents=True)
    proc, url, log = start_serve(data, base_url, **env)
    try:
        yield url, log
    finally:
        stop_serve(proc)


def _client(url: str, key: str | None) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=url, api_key=key)


def status(call: Callable[[], Any]) -> int | str:
    """The HTTP status a call fails with, "ok", or for a run that failed, "run failed: <its error>"."""
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    except Exception as exc:  # the SDK raises the run's own error for a failed run
        return f"run failed: {str(exc)[:300]}"
    return "ok"


def expect(call: Callable[[], Any], *wanted: int | str) -> Callable[[], str | None]:
    def probe() -> str | None:
        got = status(call)
        ok = any(got == w or (isinstance(got, str) and isinstance(w, str) and w in got) for w in wanted)
        return None if ok else f"got {got!r}, wanted {' or '.join(map(repr, wanted))}"
    return probe


def _ingest_failure(client: Any, content: Any, says: str) -> Callable[[], str | None]:
    """An ingest of bad content fails the run with the loader's message, never a raw Python error."""
    def probe() -> str | None:
        got = status(lambda: client.runs.wait(None, "ingest", input={"namespace": "alice", "dialogue": content}))
        if not isinstance(got, str) or says not in got:
            return f"got {got!r}"
        raw = ("TypeError", "RecursionError", "UnicodeEncodeError", "Traceback")
        return f"a raw error: {got!r}" if any(r in got for r in raw) else None
    return probe


def _auth_on(tally: Tally, url: str, log: Path) -> None:
    alice, bob = _client(url, ALICE), _client(url, BOB)
    content = dialogue()
    tally.check(SURFACE, "alice ingests content", expect(lambda: alice.runs.wait(
        None, "ingest", input={"namespace": "alice", "dialogue": content, "methods": ["memr3"]}), "ok"))
    for path in ("/info", "/metrics", "/docs", "/openapi.json", "/", "/ui/rag/index.js", "/assistants/search"):
        tally.check(SURFACE, f"GET {path} without a key", expect(
            lambda path=path: httpx.get(url + path).raise_for_status(), 401))
    tally.check(SURFACE, "an unknown key", expect(lambda: httpx.get(
        url + "/info", headers={"x-api-key": "x" * 20}).raise_for_status(), 401))
    tally.check(SURFACE, "Studio's bypass header", expect(lambda: httpx.post(
        url + "/threads/search", json={}, headers={"x-auth-scheme": "langsmith"}).raise_for_status(), 401))
    tally.check(SURFACE, "GET /ok without a key", expect(lambda: httpx.get(url + "/ok").raise_for_status(), "ok"))
    thread = alice.threads.create()["thread_id"]
    alice.runs.wait(thread, "rag", input=ASK)
    tally.check(SURFACE, "bob runs on alice's namespace", expect(lambda: bob.runs.wait(None, "rag", input=ASK), 403))
    tally.check(SURFACE, "bob reads alice's thread", expect(lambda: bob.threads.get_state(thread), 404, 403))
    tally.check(SURFACE, "bob copies alice's thread", expect(lambda: bob.threads.copy(thread), 404))
    tally.check(SURFACE, "a copy of a missing thread", expect(lambda: alice.threads.copy(MISSING), 404))
    tally.check(SURFACE, "alice edits her thread's state", expect(
        lambda: alice.threads.update_state(thread, {"namespace": "alice"}), 403))
    tally.check(SURFACE, "alice's thread asked for another namespace", expect(
        lambda: alice.runs.wait(thread, "rag", input={**ASK, "namespace": "alice-2"}), 409))
    tally.check(SURFACE, "a run setting the data directory", expect(
        lambda: alice.runs.wait(None, "rag", input=ASK, context={"data_dir": "/tmp/elsewhere"}), 400))
    tally.check(SURFACE, "alice reads bob's store items", expect(
        lambda: alice.store.search_items(["recollect", "bob", "turn"]), 403))
    text = json.dumps(content)
    tally.check(SURFACE, "ingest: a lone surrogate in the text", _ingest_failure(
        alice, text.replace("grey", "\\ud800"), "holds a lone UTF-16 surrogate"))
    tally.check(SURFACE, "ingest: nested 100,000 deep", _ingest_failure(alice, "[" * 100_000, "nested more than 64"))
    tally.check(SURFACE, "ingest: an object nested 200 deep", _ingest_failure(
        alice, {**content, "notes": json.loads("[" * 200 + "]" * 200)}, "nested more than 64"))
    for depth in (500, 1500):  # deeper than the SDK's encoder goes: LangGraph's own parser refuses the request
        body = '{"assistant_id": "ingest", "input": {"namespace": "alice", "dialogue": {"notes": ' + \
            "[" * depth + "]" * depth + "}}}"
        tally.check(SURFACE, f"ingest: a request body nested {depth} deep", expect(lambda body=body: httpx.post(
            url + "/runs/wait", content=body, timeout=60, headers={"content-type": "application/json",
                                                                   "x-api-key": ALICE}).raise_for_status(), 400, 422))
    tally.check(SURFACE, "ingest: over the size limit", _ingest_failure(
        alice, {**content, "notes": "x" * 6_000_000}, "over the server's limit"))
    tally.check(SURFACE, "ingest: a file path", _ingest_failure(alice, "/etc/passwd", "not valid JSON"))
    _mcp(tally, url)
    tally.check(SURFACE, "no storage error in the server log", lambda: None if "no such table" not in
                log.read_text() else "the log says 'no such table'")


def _mcp(tally: Tally, url: str) -> None:
    def rpc(method: str, params: dict[str, Any] | None = None, key: str | None = ALICE) -> httpx.Response:
        headers = {"accept": "application/json, text/event-stream", **({"x-api-key": key} if key else {})}
        return httpx.post(url + "/mcp", headers=headers, timeout=120,
                          json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})

    def answers(method: str, params: dict[str, Any] | None = None, error: bool | None = None,
                key: str | None = ALICE, status: int = 200) -> Callable[[], str | None]:
        def probe() -> str | None:
            got = rpc(method, params, key)
            if got.status_code != status:
                return f"HTTP {got.status_code}: {got.text[:200]!r}"
            if status != 200 or error is None:
                return None
            result = got.json().get("result") or {}
            return None if bool(result.get("isError")) == error else f"isError is {result.get('isError')}: {got.text[:200]}"
        return probe

    tally.check(MCP, "a call without a key", answers("tools/list", key=None, status=401))
    tally.check(MCP, "initialize", answers("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                                          "clientInfo": {"name": "probe", "version": "1"}}))
    tally.check(MCP, "tools/list", answers("tools/list"))
    tally.check(MCP, "a tool on the caller's namespace", answers(
        "tools/call", {"name": "rag", "arguments": ASK}, error=False))
    tally.check(MCP, "a tool on another user's namespace", answers(
        "tools/call", {"name": "rag", "arguments": {**ASK, "namespace": "bob"}}, error=True))
    tally.check(MCP, "tools have their own descriptions", lambda: None if all(
        not t["description"].startswith("Tool based on") for t in rpc("tools/list").json()["result"]["tools"])
        else "generic descriptions")


def _auth_off(tally: Tally, url: str, log: Path) -> None:
    client = _client(url, None)
    content = dialogue()
    for namespace in ("solo", "other"):
        client.runs.wait(None, "ingest", input={"namespace": namespace, "dialogue": content, "methods": ["memr3"]})
    tally.check(SURFACE, "no auth: stateless runs log no storage error", lambda: None if "no such table" not in
                log.read_text() else "the log says 'no such table'")
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "rag", input={**ASK, "namespace": "solo"})

    def kept(update: dict[str, Any]) -> Callable[[], str | None]:
        def probe() -> str | None:
            client.threads.update_state(thread, update)
            client.runs.wait(thread, "rag", input={"messages": [{"role": "human", "content": ASK["question"]}]})
            now = client.threads.get_state(thread)["values"]["namespace"]
            return None if now == "solo" else f"the next run read {now!r}"
        return probe

    tally.check(SURFACE, "no auth: update_state switches no thread", kept({"namespace": "other"}))
    tally.check(SURFACE, "no auth: nor its overwrite form", kept({"namespace": {"__overwrite__": "other"}}))
    tally.check(SURFACE, "no auth: a run naming another namespace", expect(
        lambda: client.runs.wait(thread, "rag", input={**ASK, "namespace": "other"}), 409))
    tally.check(SURFACE, "no auth: a command naming another namespace", expect(
        lambda: client.runs.wait(thread, "rag", command={"update": {"namespace": "other"}}), 409))
    tally.check(SURFACE, "no auth: a copy of a missing thread", expect(lambda: client.threads.copy(MISSING), 404))
    tally.check(SURFACE, "no auth: a run setting an endpoint", expect(
        lambda: client.runs.wait(None, "rag", input=ASK, context={"llm_base_url": "http://x"}), 400))
    tally.check(SURFACE, "no auth: ingest of a lone surrogate", _ingest_failure(
        client, json.dumps(content).replace("grey", "\\udfff"), "holds a lone UTF-16 surrogate"))


def run(tally: Tally, work: Path, base_url: str) -> None:
    work.mkdir(parents=True)
    auth = work / "auth.json"
    auth.write_text(json.dumps({ALICE: {"user": "alice", "namespaces": ["alice", "alice-2"]},
                                BOB: {"user": "bob", "namespaces": ["bob"]}}))
    with serving(work / "served-auth", base_url, RECOLLECT_AUTH_FILE=str(auth)) as (url, log):
        _auth_on(tally, url, log)
    with serving(work / "served-open", base_url) as (url, log):
        _auth_off(tally, url, log)
