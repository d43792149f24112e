"""An ingest stopped anywhere, then run again, stores the same memory as a clean ingest (issue 25, item 3).

In process, deterministically: the ingest stops (an exception nothing catches, so open transactions roll
back as after a kill) right before one of its writes, for writes spread over the whole build, and a second
ingest completes it. As a process: `recollect ingest` against a scripted endpoint gets `kill -9` at several
points of one build, each run resuming the last, until one finishes. Each time the stored documents and
vectors equal a clean build's, and questions asked of every method make the same requests."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext, available_builders
from recollect.ingestion import ingest_conversation
from recollect.llm.local_runtime import free_port
from recollect.llm.scripted import ScriptedChatModel, scripted
from recollect.memory.docstore import DocStore
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.store_docs import StoreDocs
from recollect.memory.vectors import VectorIndex
from recollect.memory.workspace import Workspace
from tests.core.faults import (
    ROOT,
    SAMPLE,
    builder_reply,
    good_model,
    good_reply,
    memory_dump,
    question_requests,
)

QUESTIONS = ("What is the name of Maya's dog?", "Where does Maya work?", "When did Theo make his first bowl?")
MEMORY_METHODS = ("memr3", "mragent", "hymem", "mgretrieval")
# The document store's writes (whichever backend the data directory uses) and the vector index's.
_DOC_WRITES = ("put", "put_many", "delete", "delete_kind", "cache_put")
WRITES = {DocStore: _DOC_WRITES, StoreDocs: _DOC_WRITES, VectorIndex: ("upsert", "delete")}


class Stop(BaseException):
    """The process ends here: no handler catches it, an open transaction rolls back."""


def _requests(data_dir: str) -> dict[str, list[str]]:
    return question_requests(data_dir, MEMORY_METHODS, QUESTIONS)


def _assert_same_memory(data_dir: str, clean: str) -> None:
    got, want = memory_dump(data_dir, "ns"), memory_dump(clean, "ns")
    differ = sorted(k for k in {*got["docs"], *want["docs"]} if got["docs"].get(k) != want["docs"].get(k))
    differ += sorted(k for k in {*got["vectors"], *want["vectors"]} if got["vectors"].get(k) != want["vectors"].get(k))
    assert differ == []
    for name in ("recollect.db", "store.sqlite"):
        if (Path(data_dir) / name).exists():
            with sqlite3.connect(Path(data_dir) / name) as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _ingest(data_dir: str) -> None:
    ws = Workspace(data_dir, embeddings=HashEmbeddings())
    ingest_conversation(load_conversation(SAMPLE), "ns", AllMethodsContext(data_dir=data_dir, chat_model=good_model()),
                        methods=available_builders(), ws=ws)


def _counting_writes(monkeypatch: pytest.MonkeyPatch, stop_at: int | None) -> Callable[[], int]:
    """Count every write of the stores; with `stop_at`, raise `Stop` right before that write."""
    count = [0]

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            if count[0] == stop_at:
                raise Stop
            return original(*args, **kwargs)
        return write

    for cls, names in WRITES.items():
        for name in names:
            monkeypatch.setattr(cls, name, wrap(getattr(cls, name)))
    return lambda: count[0]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = str(tmp_path_factory.mktemp("clean"))
    with pytest.MonkeyPatch.context() as mp:
        writes = _counting_writes(mp, None)
        _ingest(data)
        total = writes()
    return {"data": data, "writes": total, "requests": _requests(data)}


def test_an_ingest_stopped_before_any_write_completes_to_the_clean_memory(
    clean: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = clean["writes"]
    points = sorted({1, 2, total - 1, total, *range(3, total, max(1, total // 8))})
    for n in points:
        data = str(tmp_path / f"stop-{n}")
        with monkeypatch.context() as mp:
            _counting_writes(mp, n)
            with pytest.raises(Stop):
                _ingest(data)
        _ingest(data)
        _assert_same_memory(data, clean["data"])
    assert _requests(data) == clean["requests"]


def test_mragent_stopped_between_its_last_session_and_the_indexes(
    clean: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window after a session's docs are saved and before the cue index, persona map and timeline are
    rebuilt: the next run has no session left to build, and must still rebuild them."""
    import recollect.graphs.mragent.memory as mragent_memory

    calls = [0]
    original = mragent_memory.rebuild_indexes

    def stop_after_the_last_save(*args: Any) -> None:
        calls[0] += 1
        if calls[0] == len(load_conversation(SAMPLE).sessions):
            raise Stop
        original(*args)

    data = str(tmp_path / "data")
    with monkeypatch.context() as mp:
        mp.setattr(mragent_memory, "rebuild_indexes", stop_after_the_last_save)
        with pytest.raises(Stop):
            _ingest(data)
    _ingest(data)
    _assert_same_memory(data, clean["data"])
    assert _requests(data) == clean["requests"]


def _summaries_of_two_turns(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """HyMem items of two turns each: fewer than the per-turn items of a fallback."""
    prompt = "\n".join(str(m.content) for m in messages)
    if not prompt.startswith("Write the key information"):
        return good_reply(messages, kwargs)
    turns = re.findall(r"^\[(D\d+:\d+)\] ", prompt, re.M)
    return json.dumps({"items": [{"text": f"what happened in {a} and {b}", "turn_ids": [a, b]}
                                 for a, b in zip(turns[::2], turns[1::2], strict=False)]})


def test_hymem_stopped_after_a_fallbacks_vectors_leaves_none_of_them_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A junk reply's session is stored as one item per turn; stopped after their vectors and before the
    session's doc, the next run's fewer items must not leave the rest in the index."""
    data = tmp_path / "data"
    ws = Workspace(data, embeddings=HashEmbeddings())
    conversation = load_conversation(SAMPLE)
    upsert = VectorIndex.upsert

    def upsert_then_stop(self: VectorIndex, units: list[Any], *args: Any, **kwargs: Any) -> int:
        upsert(self, units, *args, **kwargs)
        if self.kind == "hymem_summaries":
            raise Stop
        return len(units)

    with monkeypatch.context() as mp:
        mp.setattr(VectorIndex, "upsert", upsert_then_stop)
        with pytest.raises(Stop):
            ingest_conversation(conversation, "ns", AllMethodsContext(data_dir=str(data), chat_model=scripted(default="")),
                                methods=["hymem"], ws=ws)
    ingest_conversation(conversation, "ns", AllMethodsContext(
        data_dir=str(data), chat_model=ScriptedChatModel(default=_summaries_of_two_turns)), methods=["hymem"], ws=ws)
    stored = {item["id"] for items in ws.docs.items("ns", "hymem_summaries").values() for item in items}
    assert len(stored) == 12 and {u.id for u in ws.index("hymem_summaries", "ns").all()} == stored


# --- kill -9 of the real process ----------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        prompt = "\n".join(str(m.get("content")) for m in body.get("messages") or [])
        gate = self.server.gate
        with gate.lock:
            gate.calls += 1
            number = gate.calls
        if number == gate.hold_at:  # answer only after the test has killed the caller
            gate.held.set()
            gate.release.wait(60)
        content = builder_reply(prompt, body.get("response_format"))
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": content}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the caller was killed while it waited
            return
        if number == gate.kill_after:
            gate.replied.set()


class _Gate:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.hold_at: int | None = None
        self.kill_after: int | None = None
        self.held, self.release, self.replied = threading.Event(), threading.Event(), threading.Event()


@pytest.fixture
def endpoint() -> Iterator[tuple[str, _Gate]]:
    """An OpenAI-compatible endpoint answering with `builder_reply` that can hold a call or report one answered."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    server.gate = _Gate()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", server.gate  # type: ignore[attr-defined]
    finally:
        server.gate.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def _start_ingest(data_dir: Path, base_url: str) -> subprocess.Popen:
    env = dict(os.environ, RECOLLECT_DATA_DIR=str(data_dir), RECOLLECT_EMBEDDER="hash", RECOLLECT_LLM_BASE_URL=base_url,
               RECOLLECT_LLM_MODEL="scripted", RECOLLECT_LLM_API_KEY="scripted")
    return subprocess.Popen([sys.executable, "-m", "recollect.cli", "ingest", str(SAMPLE), "-n", "ns"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.service
def test_kill_9_of_ingest_at_several_points_then_a_rerun_is_a_clean_ingest(
    endpoint: tuple[str, _Gate], tmp_path: Path
) -> None:
    base_url, gate = endpoint
    clean = tmp_path / "clean"
    done = _start_ingest(clean, base_url)
    assert done.wait(120) == 0, done.stdout.read() if done.stdout else ""
    total, gate.calls = gate.calls, 0
    assert total >= 10  # every LLM builder calls the endpoint

    data = tmp_path / "killed"
    # (hold this call and kill while it waits | kill as soon as this call is answered), in cumulative calls:
    # each run resumes the last, its valid replies from the LLM cache.
    for hold_at, kill_after in ((2, None), (None, 3), (None, total // 2), (total // 2 + 2, None), (None, total - 2),
                                (total - 1, None)):
        gate.hold_at, gate.kill_after = hold_at, kill_after
        gate.held.clear()
        gate.replied.clear()
        gate.release.clear()
        proc = _start_ingest(data, base_url)
        assert (gate.held if hold_at else gate.replied).wait(120), proc.communicate(timeout=60)[0]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        gate.release.set()
    gate.hold_at = gate.kill_after = None
    rerun = _start_ingest(data, base_url)
    assert rerun.wait(120) == 0, rerun.stdout.read() if rerun.stdout else ""
    # Answered and cached replies are not asked again: at most the call each kill interrupted is repeated.
    assert total <= gate.calls <= total + 6
    _assert_same_memory(str(data), str(clean))
    assert _requests(str(data)) == _requests(str(clean))
