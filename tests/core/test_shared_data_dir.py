"""One data directory, several processes: an idle `recollect serve` beside CLI commands, and a
long-lived process that keeps answering after another one forgets and re-ingests a namespace.
Scripted models only."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import recollect.cli as cli
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from recollect.runner import ask, server_checkpointer
from recollect.settings import get_settings
from tests.helpers import make_conversation


def _cat_answer(msgs: list[Any], kw: dict[str, Any]) -> dict[str, Any]:
    """Names the cat the prompt shows, so an answer tells which memory it was read from."""
    prompt = "\n".join(str(m.content) for m in msgs)
    name = next((n for n in ("Pixel", "Tiger") if n in prompt), "No information available")
    return {"answer": name, "supports": ["D1:1"]}


@pytest.fixture
def idle_server(data_dir: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], Any]]:
    """The server's checkpointer, opened the way `recollect serve` opens it and held by an idle event loop
    in another thread. Calling the fixture's value stops it and returns the answer it then reads from
    thread `t1` through its own connection."""
    monkeypatch.setenv("RECOLLECT_DATA_DIR", data_dir)
    get_settings.cache_clear()
    opened, release, seen = threading.Event(), threading.Event(), {}

    async def serve() -> None:
        async with server_checkpointer() as saver:
            opened.set()
            while not release.is_set():
                await asyncio.sleep(0.02)
            latest = await saver.aget_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
            seen["answer"] = latest.checkpoint["channel_values"].get("answer") if latest else None

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)

    def stop() -> Any:
        release.set()
        thread.join(30)
        return seen.get("answer")

    thread.start()
    assert opened.wait(30)
    try:
        yield stop
    finally:
        stop()
        get_settings.cache_clear()


def test_cli_beside_an_idle_server_on_a_fresh_data_dir(
    idle_server: Callable[[], Any], data_dir: str, sample_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = scripted(default={"answer": "Biscuit is Maya's dog", "supports": ["D1:1"]})
    monkeypatch.setattr(cli, "_context", lambda args, methods=None: AllMethodsContext(data_dir=data_dir, chat_model=model))
    start = time.monotonic()
    for ns, thread in (("demo", "t1"), ("other", "t2")):
        assert cli.main(["ingest", str(sample_path), "-n", ns, "--methods", "memr3"]) == 0
        code = cli.main(["ask", "Who is Biscuit?", "-n", ns, "-m", "rag", "--thread", thread])
        err = capsys.readouterr().err
        assert code == 0 and "locked" not in err, err
    assert cli.main(["forget", "other"]) == 0 and "1 threads" in capsys.readouterr().out
    assert time.monotonic() - start < 25  # SQLite waits 30 s for a lock, then fails "database is locked"
    assert idle_server() == "Biscuit is Maya's dog"  # the server reads what the CLI wrote


PIXEL = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice")]], conv_id="conv-cat")
TIGER = make_conversation([[("Ann", "my cat is called Tiger"), ("Bob", "cool")]], conv_id="conv-cat")


def test_a_long_lived_workspace_survives_forget_and_reingest_by_another(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = register_workspace(Workspace(data, embeddings=HashEmbeddings()))  # what the server process holds
    other = Workspace(data, embeddings=HashEmbeddings())  # the CLI process
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=_cat_answer))
    ingest_conversation(PIXEL, "alice", ctx, methods=["memr3"], ws=server)
    assert ask("alice", "What is Ann's cat called?", "rag", ctx)["answer"] == "Pixel"
    assert "Pixel" in server.turns("alice")["D1:1"].text  # cached handles and turns

    other.forget_namespace("alice")
    ingest_conversation(TIGER, "alice", ctx, methods=["memr3"], ws=other)  # same ids and count, new text

    assert [u.text for u in server.index("turns", "alice").query("cat", 1)] == ["Ann: my cat is called Tiger"]
    assert "Tiger" in server.turns("alice")["D1:1"].text
    assert ask("alice", "What is Ann's cat called?", "rag", ctx)["answer"] == "Tiger"


def test_a_cached_handle_is_reused_while_the_collection_lives(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "data", embeddings=HashEmbeddings())
    ingest_conversation(PIXEL, "alice", AllMethodsContext(data_dir=str(tmp_path / "data")), methods=[], ws=ws)
    assert ws.index("turns", "alice") is ws.index("turns", "alice")
