"""A memory built from fallbacks does not stick (issue 25, item 3): after an ingest whose replies were
unusable, an ingest with a working model builds again exactly the sessions that fell back (asking their
failed calls again, everything else from the LLM cache), ends with the memory a clean build has, and a third
ingest makes no call. A long-lived process reading the memory sees the rebuilt one. Scripted models only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel, scripted
from recollect.memory.build import BuildReport
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from tests.core.faults import SAMPLE, empty_reply, good_model, good_reply, memory_dump, question_requests

LLM_BUILDERS = ("mragent", "mgretrieval", "hymem")  # each also names the graph that reads its memory
QUESTIONS = ("What is the name of Maya's dog?", "Where does Maya work?")
SESSION_1 = "I finally adopted a dog yesterday"
SESSION_2 = "I made my first bowl last Thursday"  # text of the session whose calls fail in the partial case


def _ingest(data_dir: Path, model: ScriptedChatModel, builder: str) -> BuildReport:
    ws = register_workspace(Workspace(data_dir, embeddings=HashEmbeddings()))
    ctx = AllMethodsContext(data_dir=str(data_dir), chat_model=model)
    return ingest_conversation(load_conversation(SAMPLE), "ns", ctx, methods=[builder], ws=ws)[-1]


def _fails_in_session_2(messages: list[Any], kwargs: dict[str, Any]) -> str:
    prompt = "\n".join(str(m.content) for m in messages)
    return "not json" if SESSION_2 in prompt else good_reply(messages, kwargs)



def _blank_keywords(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """Every turn named, every keyword blank or unusable; MRAgent's sentences (or turn rows) all name no turn of the window."""
    prompt = "\n".join(str(m.content) for m in messages)
    if prompt.startswith("List search keywords"):
        return json.dumps({n: " , ," for n, _, _ in re.findall(r"^\[(\d+)\] ([^:\n]+): (.*)$", prompt, re.M)})
    if prompt.startswith("Rewrite this conversation session"):
        return '{"topics": [], "facts": [], "sentences": [[999, "Nobody said anything.", "chat", [], ""]]}'
    if prompt.startswith("Index this conversation session"):
        return '{"topics": [], "facts": [], "turns": [[999, "chat", [], ""]]}'
    return empty_reply(messages, kwargs)


@pytest.fixture
def clean(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    builder = request.node.callspec.params["builder"]
    data = tmp_path / "clean"
    _ingest(data, good_model(), builder)
    return {"memory": memory_dump(data, "ns"), "requests": question_requests(data, [builder], QUESTIONS)}


@pytest.mark.parametrize("junk", ["", "{\"unexpected\": true}", "\x00\ud800 not json", empty_reply, _blank_keywords],
                         ids=["empty-text", "wrong-object", "junk", "parsed-empty", "parsed-blank"])
@pytest.mark.parametrize("builder", LLM_BUILDERS)
def test_a_working_model_rebuilds_every_session_a_junk_model_built(
    tmp_path: Path, builder: str, junk: Any, clean: dict[str, Any]
) -> None:
    data = tmp_path / "data"
    first = _ingest(data, scripted(default=junk), builder)
    assert first.llm_calls > 0 and first.fallbacks
    assert question_requests(data, [builder], QUESTIONS) != clean["requests"]  # read once: a cached graph

    second = _ingest(data, good_model(), builder)
    assert second.llm_calls > 0 and second.fallbacks == []
    assert memory_dump(data, "ns") == clean["memory"]
    assert question_requests(data, [builder], QUESTIONS) == clean["requests"]  # the same process sees it

    third_model = good_model()
    third = _ingest(data, third_model, builder)
    assert third.llm_calls == 0 and third_model.calls == [] and third.fallbacks == []
    assert memory_dump(data, "ns") == clean["memory"]


@pytest.mark.parametrize("builder", LLM_BUILDERS)
def test_only_the_session_that_fell_back_is_built_again(tmp_path: Path, builder: str, clean: dict[str, Any]) -> None:
    data = tmp_path / "data"
    first = _ingest(data, ScriptedChatModel(default=_fails_in_session_2), builder)
    assert first.fallbacks and all(("2" in line) for line in first.fallbacks), first.fallbacks

    model = good_model()
    second = _ingest(data, model, builder)
    assert second.fallbacks == [] and second.llm_calls == len(model.calls) > 0
    prompts = model.prompts()
    assert not any(SESSION_1 in p for p in prompts)  # the clean session before it: untouched, no call
    if builder == "mgretrieval":
        # V after session s depends on sessions 1..s, so the later sessions are replayed too: their keyword
        # extraction from the cache, only the vocabulary matching against the new V may be asked.
        extraction = [p for p in prompts if p.startswith("List search keywords")]
        assert extraction and all(SESSION_2 in p for p in extraction)
    else:
        assert len(prompts) == 1 and SESSION_2 in prompts[0]
    assert memory_dump(data, "ns") == clean["memory"]
    assert question_requests(data, [builder], QUESTIONS) == clean["requests"]
    assert _ingest(data, good_model(), builder).llm_calls == 0


def test_anempty_reply_cached_before_the_check_is_asked_again(tmp_path: Path) -> None:
    """Stores written before an empty reply counted as failed: MGRetrieval's session record lists every turn as a
    fallback (and no failed call), and the LLM cache holds the empty reply. Both count as failed now."""
    from pydantic import BaseModel

    from recollect.graphs.mgretrieval.memory import failed_call
    from recollect.llm.cache import LLMCache, cached_structured_call

    every = {"keywords": [["D1:1", ["a"]], ["D1:2", ["b"]]], "fallback_turns": ["D1:1", "D1:2"], "notes": []}
    assert failed_call(every) and not failed_call({**every, "fallback_turns": ["D1:2"]})

    class Reply(BaseModel):
        items: list[str]

    ws = Workspace(tmp_path / "data", embeddings=HashEmbeddings())
    cache = LLMCache(ws.docs)
    cache.put("ns:k", {"ok": True, "value": {"items": []}})
    model = scripted(default='{"items": ["kept"]}')
    got = cached_structured_call(cache, "ns:k", model, [], Reply, node="t", method="json_mode", max_tokens=10,
                                 report=BuildReport("t"), check=lambda r: None if r.items else "no item")
    assert not got.cached and got.value == Reply(items=["kept"]) and len(model.calls) == 1
    assert cache.get("ns:k") == {"ok": True, "value": {"items": ["kept"]}}
