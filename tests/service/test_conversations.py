"""`recollect serve` with a scripted model (tests/service/scripted_endpoint.py), through the
LangGraph SDK: two questions on one thread per method, chat-style `messages`, settings checked by
the server, forget through the server, one checkpoint store shared with the CLI, and serve's port
report and clean shutdown. No real model is started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext, available_builders
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from tests.service.scripted_endpoint import ScriptedEndpoint, scripted_callable

pytestmark = [pytest.mark.service]
ROOT = Path(__file__).resolve().parents[2]
METHODS = ["memr3", "rag", "full_context", "mragent", "hymem", "mgretrieval"]
URL_LINE = re.compile(r"serving .* on (http://127\.0\.0\.1:(\d+))")


def _start_serve(data: Path, base_url: str, log_name: str) -> tuple[subprocess.Popen, str, Path]:
    env = dict(os.environ, RECOLLECT_DATA_DIR=str(data), RECOLLECT_EMBEDDER="hash", RECOLLECT_LLM_BASE_URL=base_url,
               RECOLLECT_LLM_MODEL="scripted", RECOLLECT_LLM_API_KEY="scripted", PYTHONUNBUFFERED="1")
    log = data / log_name
    proc = subprocess.Popen([sys.executable, "-m", "recollect.cli", "serve", "--port", "0"], cwd=ROOT, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited: {log.read_text()[-3000:]}")
        found = URL_LINE.search(log.read_text())
        if found:
            return proc, found.group(1), log
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"serve did not report its URL: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("conversations")
    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=scripted_callable))
    conversation = load_conversation(ROOT / "examples" / "sample_dialogue.json")
    for ns in ("svc", "gone"):
        ingest_conversation(conversation, ns, ctx, methods=available_builders(), ws=ws)
    with ScriptedEndpoint() as base_url:
        proc, url, log = _start_serve(data, base_url, "serve.log")
        try:
            yield {"url": url, "data": data, "proc": proc, "log": log}
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()


def _client(service: dict[str, Any]) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=service["url"])


def _run(client: Any, thread_id: str, method: str, payload: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    """Stream one run; returns its custom trace records."""
    events = list(client.runs.stream(thread_id, method, input=payload, stream_mode=["custom", "values"], **kw))
    errors = [e.data for e in events if e.event == "error"]
    assert not errors, errors
    return [e.data["trace"] for e in events if e.event == "custom" and "trace" in (e.data or {})]


@pytest.mark.parametrize("method", METHODS)
def test_two_questions_on_one_thread(service: dict[str, Any], method: str) -> None:
    client = _client(service)
    thread = client.threads.create()["thread_id"]
    _run(client, thread, method, {"namespace": "svc", "question": "What is the name of Maya's dog?"})
    first = client.threads.get_state(thread)["values"]
    assert first["answer"] == "Biscuit"

    # Studio's chat view: only a human message; the namespace stays the thread's
    second_trace = _run(client, thread, method, {"messages": [{"role": "human", "content": "Where does Maya work?"}]})
    values = client.threads.get_state(thread)["values"]
    assert values["question"] == "Where does Maya work?" and values["answer"] == "a bakery"
    assert len(values["trace"]) == len(second_trace)  # the first question's trace did not carry over
    # usage is per question, not summed: the same question on a fresh thread costs the same calls
    fresh = client.threads.create()["thread_id"]
    _run(client, fresh, method, {"namespace": "svc", "question": "Where does Maya work?"})
    assert values["usage"]["calls"] == client.threads.get_state(fresh)["values"]["usage"]["calls"]
    messages = values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "human", "ai"]
    assert [m["content"] for m in messages] == ["What is the name of Maya's dog?", "Biscuit",
                                                "Where does Maya work?", "a bakery"]
    assert messages[-1]["response_metadata"]["supports"] == values["supports"]


def test_a_bad_setting_fails_the_run_with_its_name(service: dict[str, Any]) -> None:
    client = _client(service)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "rag", input={"namespace": "svc", "question": "dog?"},
                             context={"rag_top_k": -3})
    client.runs.join(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "error"
    assert "setting rag_top_k: must be at least 1" in service["log"].read_text()


def test_forget_through_the_server(service: dict[str, Any]) -> None:
    client = _client(service)
    asked = client.threads.create()["thread_id"]
    _run(client, asked, "rag", {"namespace": "gone", "question": "What is the name of Maya's dog?"})
    out = client.runs.wait(None, "forget", input={"namespace": "gone"})
    assert asked in out["forgotten"]["threads"] and out["forgotten"]["collections"] >= 1
    again = client.runs.wait(None, "forget", input={"namespace": "gone"})  # idempotent
    assert again["forgotten"]["documents"] == 0 and again["forgotten"]["threads"] == []

    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "rag", input={"namespace": "gone", "question": "dog?"})
    client.runs.join(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "error"
    assert "namespace 'gone' has never been ingested" in service["log"].read_text()
    # the other namespace is untouched
    other = client.threads.create()["thread_id"]
    _run(client, other, "rag", {"namespace": "svc", "question": "What is the name of Maya's dog?"})
    assert client.threads.get_state(other)["values"]["answer"] == "Biscuit"


def test_cli_history_sees_server_threads(service: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from recollect.cli import main

    client = _client(service)
    thread = client.threads.create()["thread_id"]
    _run(client, thread, "memr3", {"namespace": "svc", "question": "What is the name of Maya's dog?"})
    assert main(["--data-dir", str(service["data"]), "history", thread]) == 0
    out = capsys.readouterr().out
    assert "question: What is the name of Maya's dog?" in out and "answer='Biscuit'" in out


def test_serve_reports_its_port_and_sigterm_stops_everything(tmp_path: Path) -> None:
    with ScriptedEndpoint() as base_url:
        proc, url, _log = _start_serve(tmp_path, base_url, "serve2.log")
        children = subprocess.run(["pgrep", "-g", str(_child_group(proc.pid))], capture_output=True, text=True)
        pids = [int(p) for p in children.stdout.split()]
        assert pids, "langgraph dev is not running"
        import urllib.request

        with urllib.request.urlopen(url + "/ok", timeout=5) as r:  # the printed port is the served port
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
        time.sleep(0.5)
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and "zombie" not in _status(p)]
        assert alive == []


def _child_group(pid: int) -> int:
    """The process group of serve's `langgraph dev` child (serve starts it in its own session)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    assert out, "serve has no child process"
    return os.getpgid(int(out[0]))


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def test_without_auth_clients_still_choose_no_paths_and_threads_keep_their_namespace(service: dict[str, Any]) -> None:
    """The auth handlers are installed with auth off too: server configuration is refused (LangGraph alone
    would drop it silently), a thread keeps its first namespace, and ingest takes content."""
    import json

    import httpx

    client = _client(service)
    evil = service["data"].parent / "client-chosen"
    ask = {"namespace": "svc", "question": "What is the name of Maya's dog?"}
    for kw in ({"context": {"data_dir": str(evil)}}, {"config": {"configurable": {"data_dir": str(evil)}}}):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            client.runs.wait(None, "rag", input=ask, **kw)
        assert refused.value.response.status_code == 400 and "data_dir" in refused.value.response.text
    assert not evil.exists()

    thread = client.threads.create()["thread_id"]
    _run(client, thread, "rag", ask)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(thread, "rag", input={"namespace": "gone", "question": "dog?"})
    assert refused.value.response.status_code == 409 and "reads namespace 'svc'" in refused.value.response.text
    # issue 37: with auth off an update of the thread's state switched it, and the next run read "gone"
    for update in ({"namespace": "gone"}, {"namespace": {"__overwrite__": "gone"}}):
        client.threads.update_state(thread, update)
        assert client.threads.get_state(thread)["values"]["namespace"] == "svc"
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(thread, "rag", command={"update": {"namespace": "gone"}})
    assert refused.value.response.status_code == 409
    _run(client, thread, "rag", {"messages": [{"role": "human", "content": "What is the name of Maya's dog?"}]})
    assert client.threads.get_state(thread)["values"]["namespace"] == "svc"
    # a thread that is not there is not found, also when copied (LangGraph's copy said 409)
    with pytest.raises(httpx.HTTPStatusError) as missing:
        client.threads.copy("00000000-0000-4000-8000-000000000000")
    assert missing.value.response.status_code == 404
    assert client.threads.copy(thread)["thread_id"] != thread

    dialogue = json.loads((ROOT / "examples" / "sample_dialogue.json").read_text())
    client.runs.wait(None, "ingest", input={"namespace": "posted", "dialogue": dialogue, "methods": ["memr3"]})
    fresh = client.threads.create()["thread_id"]
    _run(client, fresh, "rag", {"namespace": "posted", "question": "What is the name of Maya's dog?"})
    assert client.threads.get_state(fresh)["values"]["answer"] == "Biscuit"
