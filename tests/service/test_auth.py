"""`recollect serve` with an auth file, attacked through the LangGraph SDK by two users with two namespaces
each: no key gets 401, neither user reaches the other's namespaces, threads, store items or assistants,
a thread keeps its first namespace, and no client picks a path the server reads or writes. One server for
the whole module; a scripted model, no real one."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from recollect.service.access import SERVER_ONLY_KEYS
from tests.service.serving import SAMPLE, serve_with_keys

pytestmark = [pytest.mark.service]
ALICE_KEY, BOB_KEY = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"
ACCOUNTS = {ALICE_KEY: {"user": "alice", "namespaces": ["alice", "alice-b"]},
            BOB_KEY: {"user": "bob", "namespaces": ["bob", "bob-new"]}}
DOG = "What is the name of Maya's dog?"
MAX_BYTES = 20_000  # the server's ingest limit here: the sample dialogue (2.6 kB) fits, 30 kB does not


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with serve_with_keys(tmp_path_factory.mktemp("secured"), ACCOUNTS, ("alice", "alice-b", "bob"),
                         RECOLLECT_INGEST_MAX_BYTES=str(MAX_BYTES)) as served:
        yield served


def _client(secured: dict[str, Any], key: str | None) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=secured["url"], api_key=key)


def _status(call: Callable[[], Any]) -> int | str:
    """The HTTP status a call fails with, or "ok"."""
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return "ok"


def test_requests_without_a_known_key_get_401(secured: dict[str, Any]) -> None:
    anonymous, stranger = _client(secured, None), _client(secured, "not-a-key-0123456789abcdef")
    for client in (anonymous, stranger):
        assert _status(lambda c=client: c.assistants.search()) == 401
        assert _status(lambda c=client: c.threads.create()) == 401
        assert _status(lambda c=client: c.runs.wait(None, "rag", input={"namespace": "alice", "question": DOG})) == 401
    # LangGraph's Studio bypass (x-auth-scheme: langsmith) is off when auth is on
    studio = httpx.post(secured["url"] + "/threads/search", json={}, headers={"x-auth-scheme": "langsmith"})
    assert studio.status_code == 401
    assert ALICE_KEY not in secured["log"].read_text()


def test_nothing_but_the_health_check_answers_without_a_key(secured: dict[str, Any]) -> None:
    """Issue 37: LangGraph's meta routes answered without a key (recollect.service.http)."""
    url = secured["url"]
    for path in ("/info", "/metrics", "/docs", "/openapi.json", "/", "/ui/rag/entrypoint.js", "/threads/search",
                 "/no-such-route"):
        for headers in ({}, {"x-api-key": "not-a-key-0123456789abcdef"}, {"x-auth-scheme": "langsmith"}):
            got = httpx.get(url + path, headers=headers)
            assert got.status_code == 401 and "API key" in got.json()["detail"], (path, headers, got.status_code)
    assert httpx.get(url + "/ok").json()["ok"] is True
    assert httpx.get(url + "/info", headers={"x-api-key": ALICE_KEY}).status_code == 200
    preflight = httpx.options(url + "/threads/search", headers={
        "origin": "https://smith.langchain.com", "access-control-request-method": "POST"})
    assert preflight.status_code == 200 and preflight.content in (b"", b"OK")


def test_users_never_reach_each_others_data(secured: dict[str, Any]) -> None:
    alice, bob = _client(secured, ALICE_KEY), _client(secured, BOB_KEY)
    thread = alice.threads.create()["thread_id"]
    assert alice.runs.wait(thread, "rag", input={"namespace": "alice", "question": DOG})["answer"] == "Biscuit"
    assert bob.runs.wait(None, "rag", input={"namespace": "bob", "question": DOG})["answer"] == "Biscuit"
    alice.store.put_item(["alice", "notes"], "k", {"v": 1})
    mine = alice.assistants.create("rag", context={"namespace": "alice"}, name="alice's rag")["assistant_id"]

    attempts: dict[str, Callable[[], Any]] = {
        "run on alice": lambda: bob.runs.wait(None, "rag", input={"namespace": "alice", "question": DOG}),
        "run with alice as setting": lambda: bob.runs.wait(None, "rag", input={"question": DOG},
                                                           context={"namespace": "alice"}),
        "run on alice's thread": lambda: bob.runs.wait(thread, "rag", input={"namespace": "bob", "question": DOG}),
        "chat on alice's thread": lambda: bob.runs.wait(thread, "rag", input={"messages": [
            {"role": "human", "content": "Where does Maya work?"}]}),
        "forget alice": lambda: bob.runs.wait(None, "forget", input={"namespace": "alice"}),
        "ingest into alice": lambda: bob.runs.wait(None, "ingest", input={
            "namespace": "alice", "dialogue": json.loads(SAMPLE.read_text())}),
        "get thread": lambda: bob.threads.get(thread),
        "get state": lambda: bob.threads.get_state(thread),
        "get history": lambda: bob.threads.get_history(thread),
        "update thread": lambda: bob.threads.update(thread, metadata={"owner": "bob"}),
        "delete thread": lambda: bob.threads.delete(thread),
        "copy thread": lambda: bob.threads.copy(thread),
        "list runs": lambda: bob.runs.list(thread),
        "search by alice's namespace": lambda: bob.threads.search(values={"namespace": "alice"}),
        "store get": lambda: bob.store.get_item(["alice", "notes"], "k"),
        "store put": lambda: bob.store.put_item(["alice", "notes"], "k", {"v": 2}),
        "store search": lambda: bob.store.search_items(["alice"]),
        "store list all": lambda: bob.store.list_namespaces(),
        "get alice's assistant": lambda: bob.assistants.get(mine),
        "run alice's assistant": lambda: bob.runs.wait(None, mine, input={"question": DOG}),
        "edit alice's assistant": lambda: bob.assistants.update(mine, context={"namespace": "bob"}),
        "assistant on alice": lambda: bob.assistants.create("rag", context={"namespace": "alice"}),
    }
    got = {name: _status(call) for name, call in attempts.items()}
    # refused as forbidden or as not found, never served; a copy says nothing of the thread (issue 37: 409)
    assert {name: code for name, code in got.items() if code not in (403, 404)} == {}, got
    assert got["copy thread"] == 404 == _status(lambda: alice.threads.copy("00000000-0000-4000-8000-000000000000"))
    assert got["run on alice"] == got["forget alice"] == got["ingest into alice"] == 403
    assert got["search by alice's namespace"] == got["store get"] == got["store search"] == 403
    # searches answer, with nothing of alice's in them
    assert [t["thread_id"] for t in bob.threads.search(limit=100)] == []
    assert bob.threads.search(metadata={"owner": "alice"}) == []
    assert mine not in {a["assistant_id"] for a in bob.assistants.search(limit=100)}
    assert {"rag", "memr3", "ingest", "forget"} <= {a["graph_id"] for a in bob.assistants.search(limit=100)}
    # alice's data is intact and still hers
    assert alice.threads.get(thread)["metadata"]["owner"] == "alice"
    assert alice.store.get_item(["alice", "notes"], "k")["value"] == {"v": 1}
    assert [t["thread_id"] for t in alice.threads.search(limit=100)] == [thread]
    assert alice.runs.wait(None, mine, input={"question": DOG})["answer"] == "Biscuit"
    copied = alice.threads.copy(thread)["thread_id"]  # the owner's own copy works
    assert alice.threads.get(copied)["metadata"]["owner"] == "alice"
    alice.threads.delete(copied)


def test_a_thread_keeps_its_first_namespace(secured: dict[str, Any]) -> None:
    alice = _client(secured, ALICE_KEY)
    thread = alice.threads.create()["thread_id"]
    alice.runs.wait(thread, "rag", input={"namespace": "alice", "question": DOG})
    with pytest.raises(httpx.HTTPStatusError) as refused:
        alice.runs.wait(thread, "rag", input={"namespace": "alice-b", "question": DOG})
    assert refused.value.response.status_code == 409
    assert "reads namespace 'alice'" in refused.value.response.text and "new thread" in refused.value.response.text
    # a command cannot switch it either, nor can the thread's state be edited under auth
    assert _status(lambda: alice.runs.wait(thread, "rag", command={"update": {"namespace": "alice-b"}})) in (403, 409)
    assert _status(lambda: alice.threads.update_state(thread, {"namespace": "alice-b"})) == 403
    # the thread's own namespace, or none named, goes on
    alice.runs.wait(thread, "rag", input={"messages": [{"role": "human", "content": "Where does Maya work?"}]})
    values = alice.threads.get_state(thread)["values"]
    assert values["namespace"] == "alice" and values["answer"] == "a bakery"


def test_clients_choose_no_server_paths(secured: dict[str, Any]) -> None:
    alice = _client(secured, ALICE_KEY)
    evil = secured["root"] / "client-chosen"
    ask = {"namespace": "alice", "question": DOG}
    for context in ({"data_dir": str(evil)}, {"llm_base_url": "http://example.invalid/v1"},
                    {"llm_api_key": "x"}, {"cache_dir": str(evil)}, {"chat_model": "x"}, {"retriever": "x"}):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            alice.runs.wait(None, "rag", input=ask, context=context)
        assert refused.value.response.status_code == 400 and "server's configuration" in refused.value.response.text
    assert _status(lambda: alice.runs.wait(None, "rag", input=ask, config={"configurable": {"data_dir": str(evil)}})) == 400
    assert _status(lambda: alice.assistants.create("rag", context={"data_dir": str(evil)})) == 400
    assert _status(lambda: alice.assistants.create("rag", config={"configurable": {"data_dir": str(evil)}})) == 400
    # the ingest graph reads content, never a path, and quotes none of it back
    secret = secured["root"] / "secret.json"
    secret.write_text(SAMPLE.read_text())
    for payload, message in (({"path": str(secret)}, "the server reads no file path"),
                             ({"dialogue": str(secret)}, "not valid JSON")):
        with pytest.raises(Exception, match=message) as failed:
            alice.runs.wait(None, "ingest", input={"namespace": "alice-b", **payload})
        assert str(secret) not in str(failed.value)
    assert not evil.exists()
    # the schema a client sees holds no server configuration and no Python-only field
    for assistant in alice.assistants.search(limit=100):
        props = set((alice.assistants.get_schemas(assistant["assistant_id"])["context_schema"] or {})
                    .get("properties", {}))
        assert props and not props & SERVER_ONLY_KEYS, assistant["graph_id"]


def test_ingest_takes_dialogue_content(secured: dict[str, Any]) -> None:
    bob = _client(secured, BOB_KEY)
    dialogue = json.loads(SAMPLE.read_text())
    out = bob.runs.wait(None, "ingest", input={"namespace": "bob-new", "dialogue": dialogue, "methods": ["memr3"]})
    assert {r["method"] for r in out["reports"]} >= {"turns", "memr3"}
    assert bob.runs.wait(None, "rag", input={"namespace": "bob-new", "question": DOG})["answer"] == "Biscuit"
    # JSON text works the same (a second ingest adds nothing); bad content is one clear error quoting none of it
    bob.runs.wait(None, "ingest", input={"namespace": "bob-new", "dialogue": json.dumps(dialogue), "methods": ["memr3"]})
    bad = json.loads(json.dumps(dialogue))
    bad["sessions"][0]["turns"][0]["speaker"] = "Confidential Person"
    with pytest.raises(Exception, match=r"sessions\[0\]\.turns\[0\]\.speaker") as failed:
        bob.runs.wait(None, "ingest", input={"namespace": "bob-new", "dialogue": bad})
    assert "Confidential" not in str(failed.value)
    big = dict(dialogue, sessions=dialogue["sessions"] * 12)
    with pytest.raises(Exception, match="over the server's limit of 20,000"):
        bob.runs.wait(None, "ingest", input={"namespace": "bob-new", "dialogue": big})
    assert "Confidential" not in secured["log"].read_text()


def test_bad_auth_file_and_open_host_refuse_to_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "RECOLLECT_AUTH_FILE"}

    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "recollect.cli", "--data-dir", str(data), "serve", *args],
                              capture_output=True, text=True, timeout=60, env=env)

    open_host = serve("--host", "0.0.0.0", "--port", "0")
    assert open_host.returncode != 0
    assert "--host 0.0.0.0 lets other machines reach the server: pass --auth-file" in open_host.stderr
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"tiny-key": {"user": "u", "namespaces": ["u"]}}))
    bad = serve("--host", "0.0.0.0", "--auth-file", str(short))
    assert bad.returncode != 0 and "at least 16 characters" in bad.stderr and "tiny-key" not in bad.stderr
    assert not data.exists()  # refused before anything was written
