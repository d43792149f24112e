"""`recollect serve` + the LangGraph SDK: list graphs with schemas, stream a MemR3 run, read state."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.local_runtime import free_port
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from tests.helpers import stop_process_group

pytestmark = [pytest.mark.service, pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(chat_model, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # noqa: ANN001
    data = tmp_path_factory.mktemp("serve-data")
    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ingest_conversation(load_conversation(ROOT / "examples" / "sample_dialogue.json"), "svc",
                        AllMethodsContext(data_dir=str(data)), methods=["memr3"], ws=ws)
    port = free_port()
    env = dict(os.environ, RECOLLECT_DATA_DIR=str(data), RECOLLECT_EMBEDDER="hash")
    base = getattr(chat_model, "openai_api_base", None)
    if base:  # the server process talks to the same model endpoint as the tests
        env.update(RECOLLECT_LLM_BASE_URL=str(base), RECOLLECT_LLM_MODEL=str(chat_model.model_name),
                   RECOLLECT_LLM_API_KEY="local")
    log = open(data / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "recollect.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {(data / 'serve.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/ok", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail(f"server did not start: {(data / 'serve.log').read_text()[-3000:]}")
        yield url
    finally:
        stop_process_group(proc, grace_s=20)
        log.close()


def test_server_lists_graphs_with_input_schemas(server: str) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server)
    assistants = {a["graph_id"]: a for a in client.assistants.search(limit=50)}
    assert {"memr3", "rag", "full_context"} <= set(assistants)
    schemas = client.assistants.get_schemas(assistants["memr3"]["assistant_id"])
    # a client (a tool, an MCP model) is asked for the question only; namespace and messages are still
    # accepted as input, outside the schema (recollect.state.InputState)
    assert set(schemas["input_schema"]["properties"]) == {"question"}
    assert {"answer", "supports", "method", "cost"} <= set(schemas["output_schema"]["properties"])


def test_stream_a_memr3_run_and_read_the_thread_state(server: str) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server)
    thread = client.threads.create()
    events = list(client.runs.stream(
        thread["thread_id"], "memr3", input={"namespace": "svc", "question": "What is the name of Maya's dog?"},
        stream_mode=["custom", "updates"],
    ))
    custom = [e.data for e in events if e.event == "custom"]
    assert custom and custom[0]["trace"]["node"] == "retrieve"
    state = client.threads.get_state(thread["thread_id"])
    values = state["values"]
    assert values["answer"] and values["trace"][0]["node"] == "retrieve"
    assert any(r["node"] == "answer" for r in values["trace"])
