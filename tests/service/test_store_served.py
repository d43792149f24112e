"""The memories `recollect ingest` builds are items of the server's LangGraph store: the SDK's store API (what
Studio's memory view reads) lists them with readable values, whichever process wrote them, and `forget` leaves
none. A scripted model and the hashing embedder; the server is a real `recollect serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from tests.service.scripted_endpoint import ScriptedEndpoint, scripted_callable
from tests.service.serving import ROOT, start_serve, stop_serve

pytestmark = [pytest.mark.service]
SAMPLE = ROOT / "examples" / "sample_dialogue.json"
BUILDERS = ["memr3", "hymem", "mgretrieval", "mragent"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("served") / "data"
    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=scripted_callable))
    ingest_conversation(load_conversation(SAMPLE), "maya", ctx, methods=BUILDERS, ws=ws)
    with ScriptedEndpoint() as base_url:
        proc, url, log = start_serve(data, base_url)
        try:
            yield {"url": url, "data": data, "base_url": base_url, "log": log}
        finally:
            stop_serve(proc)


def _client(served: dict[str, Any]) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=served["url"], api_key=None)


def _namespaces(client: Any, *prefix: str) -> list[tuple[str, ...]]:
    return [tuple(ns) for ns in client.store.list_namespaces(prefix=list(prefix), limit=1000)["namespaces"]]


def _items(client: Any, namespace: list[str]) -> list[dict[str, Any]]:
    return client.store.search_items(namespace, limit=1000)["items"]


def test_ingested_memories_are_listed_with_readable_values(served: dict[str, Any]) -> None:
    client = _client(served)
    kinds = {ns[2] for ns in _namespaces(client, "recollect", "maya")}
    # raw turns, every method's own memory and the namespace's model-reply cache
    assert {"turn", "session", "hymem_session", "mg_state", "mra_session", "llm_cache"} <= kinds, kinds
    turns = _items(client, ["recollect", "maya", "turn"])
    dialogue = json.loads(SAMPLE.read_text())
    said = [t["text"] for s in dialogue["sessions"] for t in s["turns"]] if "sessions" in dialogue else []
    assert len(turns) >= 1 and all(isinstance(item["value"].get("text"), str) for item in turns)
    if said:
        assert {item["value"]["text"] for item in turns} == set(said)
    assert any("Biscuit" in item["value"]["text"] for item in turns)
    # the registry lists the namespace and which memories are built
    registry = client.store.get_item(["recollect", "%global", "namespace"], "maya")
    assert registry is not None and set(BUILDERS) <= set(registry["value"]["built"])


def test_another_processs_ingest_is_listed_without_a_restart(served: dict[str, Any]) -> None:
    client = _client(served)
    assert _namespaces(client, "recollect", "theo") == []
    env = {"RECOLLECT_DATA_DIR": str(served["data"]), "RECOLLECT_EMBEDDER": "hash",
           "RECOLLECT_LLM_BASE_URL": served["base_url"], "RECOLLECT_LLM_MODEL": "scripted",
           "RECOLLECT_LLM_API_KEY": "scripted"}
    done = subprocess.run([sys.executable, "-m", "recollect.cli", "ingest", str(SAMPLE), "-n", "theo",
                           "--methods", "memr3"], cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("recollect", "theo", "turn") in _namespaces(client, "recollect", "theo")
    # the server answers from it too
    answer = client.runs.wait(None, "rag", input={"namespace": "theo", "question": "What is the name of Maya's dog?"})
    assert answer["answer"] == "Biscuit"


def test_the_ingest_and_forget_graphs_write_and_empty_the_store(served: dict[str, Any]) -> None:
    client = _client(served)
    dialogue = json.loads(SAMPLE.read_text())
    client.runs.wait(None, "ingest", input={"namespace": "zoe", "dialogue": dialogue, "methods": ["memr3"]})
    assert _items(client, ["recollect", "zoe", "turn"])
    client.runs.wait(None, "forget", input={"namespace": "zoe"})
    assert _namespaces(client, "recollect", "zoe") == []
    assert client.store.get_item(["recollect", "%global", "namespace"], "zoe") is None
    assert _items(client, ["recollect", "maya", "turn"])  # another namespace keeps its memories


def test_no_private_document_file_is_written(served: dict[str, Any]) -> None:
    data: Path = served["data"]
    assert (data / "store.sqlite").exists() and not (data / "recollect.db").exists()


def test_stateless_runs_on_a_fresh_checkpoint_file_log_no_error(served: dict[str, Any]) -> None:
    """Issue 37: the first stateless runs of a data directory with no checkpoints.sqlite yet logged
    `no such table: checkpoints` (deleting the run's temporary thread read a table nothing had made)."""
    client = _client(served)
    client.runs.wait(None, "rag", input={"namespace": "maya", "question": "What is the name of Maya's dog?"})
    log = served["log"].read_text()
    assert "no such table" not in log and "Background worker failed" not in log, log[-3000:]
