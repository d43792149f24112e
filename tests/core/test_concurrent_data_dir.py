"""Concurrent runs in one long-lived process (threads sharing one workspace and one checkpointer, as
`recollect serve` holds them) while `recollect ingest`, `ask` and `forget` run as processes on the same data
directory, fresh or already in use: 0 failures, 0 "database is locked", and after another process forgets
and re-ingests a namespace the long-lived process reads the new memory (no stale handle). Issue 25, item 3;
extends tests/core/test_shared_data_dir.py (one command at a time beside an idle server) to real processes
and concurrent runs. Scripted models only: the processes talk to tests/service/scripted_endpoint.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from recollect.runner import ask, open_checkpointer
from tests.core.faults import ROOT
from tests.core.test_shared_data_dir import PIXEL, _cat_answer
from tests.service.scripted_endpoint import ScriptedEndpoint

pytestmark = [pytest.mark.service]
THREADS, RUNS_PER_THREAD = 4, 6
CAT = "What is Ann's cat called?"


def _dialogue(path: Path, cat: str) -> Path:
    path.write_text(json.dumps({"id": "conv-bob", "speakers": ["Ann", "Bob"], "sessions": [
        {"date_time": "10:00 am on 1 May, 2023",
         "turns": [{"speaker": "Ann", "text": f"my cat is called {cat}"}, {"speaker": "Bob", "text": "nice"}]}]}))
    return path


def _cli(data: Path, base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RECOLLECT_DATA_DIR=str(data), RECOLLECT_EMBEDDER="hash", RECOLLECT_LLM_BASE_URL=base_url,
               RECOLLECT_LLM_MODEL="scripted", RECOLLECT_LLM_API_KEY="scripted")
    return subprocess.run([sys.executable, "-m", "recollect.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "in-use"])
def test_concurrent_runs_beside_cli_ingest_ask_forget(tmp_path: Path, fresh: bool) -> None:
    data = tmp_path / "data"
    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))  # the long-lived process's
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=_cat_answer))
    if not fresh:
        ingest_conversation(PIXEL, "alice", ctx, methods=["memr3"], ws=ws)
        ask("alice", CAT, "rag", ctx)
    saver = open_checkpointer(str(data))
    failures: list[str] = []
    answers: list[Any] = []
    alice_ready = threading.Event()

    def serve(worker: int) -> None:
        try:
            if worker == 0 and fresh:  # the first ingest of a fresh data dir, as a process ingests beside it
                ingest_conversation(PIXEL, "alice", ctx, methods=["memr3"], ws=ws)
            if worker == 0:
                alice_ready.set()
            assert alice_ready.wait(120)
            for run in range(RUNS_PER_THREAD):
                state = ask("alice", CAT, "rag", ctx, checkpointer=saver, thread_id=f"w{worker}-{run}")
                answers.append(state["answer"])
        except Exception as exc:  # every failure counts, whatever it is
            failures.append(f"worker {worker}: {type(exc).__name__}: {exc}")
            alice_ready.set()

    workers = [threading.Thread(target=serve, args=(w,)) for w in range(THREADS)]
    with ScriptedEndpoint() as base_url:
        for w in workers:
            w.start()
        commands = [
            ("ingest", str(_dialogue(tmp_path / "pixel.json", "Pixel")), "-n", "bob", "--methods", "memr3"),
            ("ask", "What is the name of Maya's dog?", "-n", "bob", "-m", "rag", "--thread", "cli-1"),
            ("forget", "bob"),
            ("ingest", str(_dialogue(tmp_path / "tiger.json", "Tiger")), "-n", "bob", "--methods", "memr3"),
            ("ask", "What is the name of Maya's dog?", "-n", "bob", "-m", "rag", "--thread", "cli-2"),
        ]
        outputs = []
        for number, command in enumerate(commands):
            done = _cli(data, base_url, *command)
            outputs.append(done)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            if number == 0:  # the long-lived process reads what the first process wrote (and keeps its handles)
                assert ask("bob", CAT, "rag", ctx)["answer"] == "Pixel"
        for w in workers:
            w.join(180)
    saver.conn.close()

    assert failures == []
    assert answers == ["Pixel"] * THREADS * RUNS_PER_THREAD
    assert not any("locked" in (o.stdout + o.stderr) for o in outputs)
    assert "Biscuit" in outputs[1].stdout and "Biscuit" in outputs[4].stdout
    assert "1 threads" in outputs[2].stdout  # the CLI's forget found the thread its ask made
    assert ask("bob", CAT, "rag", ctx)["answer"] == "Tiger"  # forgotten and re-ingested elsewhere: no stale handle
