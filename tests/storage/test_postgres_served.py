"""`recollect serve` on RECOLLECT_POSTGRES_URI: the LangGraph server's store and checkpointer are the Postgres
ones, so the SDK's store API lists what a CLI ingest in another process wrote, a run on the server leaves
its checkpoints in the database, and a `forget` in this process removes both. A real Postgres (pgserver),
a real server, a scripted model endpoint and the hashing embedder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from recollect.runner import forget
from recollect.settings import Context
from tests.service.scripted_endpoint import ScriptedEndpoint
from tests.service.serving import ROOT, start_serve, stop_serve

pytestmark = [pytest.mark.service]
SAMPLE = ROOT / "examples" / "sample_dialogue.json"


def _threads(uri: str) -> set[str]:
    with psycopg.connect(uri) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}


def test_the_server_lists_and_answers_from_the_database(tmp_path: Path, postgres_uri: str) -> None:
    from langgraph_sdk import get_sync_client

    data = tmp_path / "data"
    data.mkdir()
    with ScriptedEndpoint() as base_url:
        env = dict(os.environ, RECOLLECT_DATA_DIR=str(data), RECOLLECT_EMBEDDER="hash",
                   RECOLLECT_POSTGRES_URI=postgres_uri, ANONYMIZED_TELEMETRY="False")
        done = subprocess.run([sys.executable, "-m", "recollect.cli", "ingest", str(SAMPLE), "-n", "maya",
                               "--methods", "memr3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        proc, url, log = start_serve(data, base_url, RECOLLECT_POSTGRES_URI=postgres_uri)
        try:
            client = get_sync_client(url=url, api_key=None)
            namespaces = [tuple(ns) for ns in client.store.list_namespaces(prefix=["recollect", "maya"])["namespaces"]]
            assert ("recollect", "maya", "turn") in namespaces, namespaces
            turns = client.store.search_items(["recollect", "maya", "turn"], limit=1000)["items"]
            assert any("Biscuit" in item["value"]["text"] for item in turns)

            thread = client.threads.create()["thread_id"]
            answer = client.runs.wait(thread, "rag", input={"namespace": "maya",
                                                            "question": "What is the name of Maya's dog?"})
            assert answer["answer"] == "Biscuit", log.read_text()[-3000:]
            assert thread in _threads(postgres_uri)
            assert not (data / "store.sqlite").exists() and not (data / "checkpoints.sqlite").exists()

            removed = forget("maya", Context(data_dir=str(data)))
            assert removed["threads"] == [thread] and thread not in _threads(postgres_uri)
            assert client.store.list_namespaces(prefix=["recollect", "maya"])["namespaces"] == []
        finally:
            stop_serve(proc)


def _rows(uri: str, sql: str) -> int:
    with psycopg.connect(uri) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_two_servers_share_one_postgres_and_one_chroma_server(tmp_path: Path, postgres_uri: str,
                                                               chroma_server: str) -> None:
    """The scale-out shape: one process ingests, two API servers (other data directories, other ports) answer
    from the same Postgres and Chroma server and list the memories through the SDK; a forget leaves nothing of
    the namespace in either."""
    from langgraph_sdk import get_sync_client

    from tests.storage.conftest import server_client

    shared = {"RECOLLECT_POSTGRES_URI": postgres_uri, "RECOLLECT_CHROMA_URL": chroma_server}
    with ScriptedEndpoint() as base_url:
        env = dict(os.environ, RECOLLECT_DATA_DIR=str(tmp_path / "ingester"), RECOLLECT_EMBEDDER="hash",
                   ANONYMIZED_TELEMETRY="False", **shared)
        done = subprocess.run([sys.executable, "-m", "recollect.cli", "ingest", str(SAMPLE), "-n", "maya",
                               "--methods", "memr3,hymem"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        servers = []
        try:
            for name in ("a", "b"):
                data = tmp_path / f"server-{name}"
                data.mkdir()
                servers.append(start_serve(data, base_url, **shared))
            urls = {proc_url_log[1] for proc_url_log in servers}
            assert len(urls) == 2  # two ports
            for _, url, log in servers:
                client = get_sync_client(url=url, api_key=None)
                kinds = {tuple(ns)[2] for ns in client.store.list_namespaces(prefix=["recollect", "maya"])["namespaces"]}
                assert {"turn", "hymem_session"} <= kinds, kinds
                for graph in ("rag", "memr3", "hymem"):
                    thread = client.threads.create()["thread_id"]  # a thread: its checkpoints go to Postgres
                    answer = client.runs.wait(thread, graph, input={"namespace": "maya",
                                                                    "question": "What is the name of Maya's dog?"})
                    assert answer["answer"] == "Biscuit", (graph, log.read_text()[-3000:])
            for _, _, log in servers:  # nothing stored beside a server: memories, vectors, threads are shared
                data = log.parent
                assert not {"store.sqlite", "checkpoints.sqlite", "recollect.db", "chroma"} & {p.name for p in data.iterdir()}
            assert _rows(postgres_uri, "SELECT count(DISTINCT thread_id) FROM checkpoints") >= 6

            client = get_sync_client(url=servers[1][1], api_key=None)
            client.runs.wait(None, "forget", input={"namespace": "maya"})
            assert client.store.list_namespaces(prefix=["recollect", "maya"])["namespaces"] == []
        finally:
            for proc, _, _ in servers:
                stop_serve(proc)
    assert _rows(postgres_uri, "SELECT count(*) FROM store WHERE prefix LIKE 'recollect.maya.%'") == 0
    assert _rows(postgres_uri, "SELECT count(*) FROM store WHERE prefix = 'recollect.%global.namespace' "
                               "AND key = 'maya'") == 0
    assert _rows(postgres_uri, "SELECT count(*) FROM checkpoints") == 0  # every thread read maya
    left = [c.name for c in server_client(chroma_server).list_collections() if c.name.endswith("-maya")]
    assert left == []
