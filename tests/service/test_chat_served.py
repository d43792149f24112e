"""Chat through `recollect serve` (scripted endpoint, LangGraph SDK): the `messages-tuple` stream Studio's
chat view reads carries the answer only, and the `model` setting picks a server-configured endpoint by
name (an unknown name fails the run with the choices). No real model is started."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext, available_builders
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from tests.service.scripted_endpoint import ScriptedEndpoint, scripted_callable
from tests.service.serving import stop_serve
from tests.service.test_conversations import ROOT, _start_serve

pytestmark = [pytest.mark.service]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("chat-served")
    ws = register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=scripted_callable))
    ingest_conversation(load_conversation(ROOT / "examples" / "sample_dialogue.json"), "chat", ctx,
                        methods=available_builders(), ws=ws)
    main, other = ScriptedEndpoint(), ScriptedEndpoint()
    with main as base_url, other as other_url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("RECOLLECT_MODELS", json.dumps({"other": {"base_url": other_url, "model": "other"}}))
        proc, url, log = _start_serve(data, base_url, "serve.log")
        try:
            yield {"url": url, "log": log, "main": main, "other": other}
        finally:
            stop_serve(proc)


def _client(served: dict[str, Any]) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=served["url"])


@pytest.mark.parametrize("method", ["memr3", "mragent", "mgretrieval"])
def test_the_chat_stream_carries_the_answer_only(served: dict[str, Any], method: str) -> None:
    client = _client(served)
    thread = client.threads.create()["thread_id"]
    for question, answer in (("What is the name of Maya's dog?", "Biscuit"), ("And where does she work?", "a bakery")):
        events = list(client.runs.stream(thread, method, input={"messages": [{"role": "human", "content": question}]},
                                         context={"namespace": "chat"}, stream_mode="messages-tuple"))
        assert not [e.data for e in events if e.event == "error"]
        sent = [(e.data[0]["type"], e.data[0]["content"]) for e in events if e.event == "messages"]
        assert sent == [("ai", answer)], sent


def test_the_model_setting_picks_a_configured_endpoint(served: dict[str, Any]) -> None:
    client = _client(served)
    ask = {"namespace": "chat", "question": "What is the name of Maya's dog?"}
    before = served["main"].calls, served["other"].calls
    out = client.runs.wait(None, "rag", input=ask, context={"model": "other"})
    assert out["answer"] == "Biscuit"
    assert (served["main"].calls, served["other"].calls) == (before[0], before[1] + 1)  # rag: one answer call
    client.runs.wait(None, "rag", input=ask)  # no name: the default endpoint
    assert (served["main"].calls, served["other"].calls) == (before[0] + 1, before[1] + 1)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "rag", input=ask, context={"model": "nope"})
    client.runs.join(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "error"
    assert "setting model: unknown model 'nope'; configured models: other" in served["log"].read_text()
