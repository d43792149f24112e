"""Start `recollect serve` for a test: a scripted model endpoint, the hashing embedder, its own data
directory and log, any free port; returns once serve prints the URL it serves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample_dialogue.json"
URL_LINE = re.compile(r"serving .* on (http://127\.0\.0\.1:(\d+))")


def start_serve(data: Path, base_url: str, log_name: str = "serve.log", *, args: tuple[str, ...] = (),
                **env: str) -> tuple[subprocess.Popen, str, Path]:
    environ = dict(os.environ, RECOLLECT_DATA_DIR=str(data), RECOLLECT_EMBEDDER="hash",
                   RECOLLECT_LLM_BASE_URL=base_url, RECOLLECT_LLM_MODEL="scripted",
                   RECOLLECT_LLM_API_KEY="scripted", PYTHONUNBUFFERED="1", **env)
    log = data / log_name
    proc = subprocess.Popen([sys.executable, "-m", "recollect.cli", "serve", "--port", "0", *args], cwd=ROOT,
                            env=environ, stdout=log.open("w"), stderr=subprocess.STDOUT)
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


def stop_serve(proc: subprocess.Popen) -> None:
    """SIGTERM serve (it stops its own server group), SIGKILL it if it hangs."""
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def serve_with_keys(root: Path, accounts: dict[str, Any], namespaces: Iterable[str], **env: str) -> Iterator[dict[str, Any]]:
    """`recollect serve` with auth on: the sample dialogue ingested (MemR3's memory, hashing embedder, a
    scripted model) into each of `namespaces`, `accounts` as its auth file; yields url, root, data and log."""
    from recollect.dialogue.loaders import load_conversation
    from recollect.graphs.registry import AllMethodsContext
    from recollect.ingestion import ingest_conversation
    from recollect.llm.scripted import scripted
    from recollect.memory.embeddings import HashEmbeddings
    from recollect.memory.workspace import Workspace, register_workspace
    from tests.service.scripted_endpoint import ScriptedEndpoint, scripted_callable

    data = root / "data"
    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=scripted_callable))
    for ns in namespaces:
        ingest_conversation(load_conversation(SAMPLE), ns, ctx, methods=["memr3"], ws=ws)
    auth_file = root / "auth.json"
    auth_file.write_text(json.dumps(accounts))
    with ScriptedEndpoint() as base_url:
        proc, url, log = start_serve(data, base_url, RECOLLECT_AUTH_FILE=str(auth_file), **env)
        try:
            yield {"url": url, "root": root, "data": data, "log": log}
        finally:
            stop_serve(proc)
