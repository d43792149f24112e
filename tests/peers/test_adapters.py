"""The mem0 and LangMem adapters through the real libraries, on scripted models (offline, no LLM).

They need the `peers` extra (`pip install -e '.[peers]'`) and skip without it; `make test` does not
install it. The scripted replies follow each library's own reply format, so these tests check our
configuration and calls (add / search / count, provenance, rows), not the libraries' quality.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from benchmarks.peers.llm import UsageMeter
from benchmarks.peers.run import run_peers
from recollect.dialogue.loaders import load_dialogues
from recollect.eval.rows import JSONL_NAME, load_rows
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.embeddings import DIM, HashEmbeddings
from tests.peers.fakes import answer_model

pytestmark = pytest.mark.integration
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eval_mini_locomo.json"
MISSING = "the `peers` extra is not installed (pip install -e '.[peers]')"


def skip_without(module: str) -> None:
    # find_spec, not importorskip: importing mem0 before the adapter has turned its telemetry off would send it
    if importlib.util.find_spec(module) is None:
        pytest.skip(MISSING)


_TURN = re.compile(r"^user: (\w+: .+)$", re.MULTILINE)


def _mem0_model() -> ScriptedChatModel:
    """mem0 1.x: a fact-extraction call ({"facts": [...]}) then an update call ({"memory": [...]})."""

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        text = "\n".join(str(m.content) for m in messages)
        if "facts" in text and "Input:" in text:  # fact extraction: one fact per turn
            return {"facts": [t for t in _TURN.findall(text.rsplit("Input:", 1)[-1]) if "Conversation of" not in t]}
        listed = re.findall(r"^\s*(\[.*\])\s*$", text, re.MULTILINE)  # the new facts, as mem0 lists them
        new = ast.literal_eval(listed[-1]) if listed else []
        return {"memory": [{"id": str(i), "text": t, "event": "ADD"} for i, t in enumerate(new)]}

    return ScriptedChatModel(default=reply)


def _langmem_model() -> ScriptedChatModel:
    """LangMem: one `Memory` tool call per transcript line of the session."""

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        text = "\n".join(str(m.content) for m in messages)
        lines = re.findall(r"^(\w+: .+)$", text.rsplit("<session_", 1)[-1], re.MULTILINE)
        calls = [{"name": "Memory", "args": {"content": line}, "id": f"c{uuid.uuid4().hex[:8]}", "type": "tool_call"}
                 for line in lines if "Conversation of" not in line]
        return AIMessage(content="", tool_calls=calls)

    return ScriptedChatModel(default=reply)


def test_mem0_adapter_add_search_count(tmp_path: Path) -> None:
    skip_without("mem0")
    from benchmarks.peers.mem0_peer import Mem0Peer

    conv = load_dialogues(FIXTURE)[0]
    peer = Mem0Peer(tmp_path / "mem0", _mem0_model(), HashEmbeddings(), DIM)
    try:
        stored = peer.ingest_session("ns-a", conv.sessions[0])
        assert [e for _, e in stored.events] == ["ADD"] * 3 and stored.errors == []
        assert peer.count("ns-a") == 3 and peer.count("ns-b") == 0
        found = peer.search("ns-a", "Ann grey cat Pixel", 2)
        assert len(found) == 2 and "Pixel" in found[0].text
        assert {f.id for f in found} <= {mid for mid, _ in stored.events}
        assert peer.search("ns-b", "cat", 5) == []  # scoped by user_id
    finally:
        peer.close()


def test_mem0_session_whose_extraction_fails_stores_nothing_and_says_why(tmp_path: Path) -> None:
    skip_without("mem0")
    from benchmarks.peers.mem0_peer import Mem0Peer

    def fail(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        raise ValueError("reply cut")

    conv = load_dialogues(FIXTURE)[0]
    peer = Mem0Peer(tmp_path / "mem0", ScriptedChatModel(default=fail), HashEmbeddings(), DIM)
    try:
        stored = peer.ingest_session("ns-a", conv.sessions[0])
        assert stored.events == [] and stored.errors == ["ValueError: reply cut"] and peer.count("ns-a") == 0
    finally:
        peer.close()


def test_langmem_adapter_add_search_count(tmp_path: Path) -> None:
    skip_without("langmem")
    from benchmarks.peers.langmem_peer import LangMemPeer

    conv = load_dialogues(FIXTURE)[0]
    peer = LangMemPeer(tmp_path / "langmem", _langmem_model(), HashEmbeddings(), DIM)
    try:
        stored = peer.ingest_session("ns-a", conv.sessions[0])
        assert [e for _, e in stored.events] == ["ADD"] * 3 and stored.errors == []
        assert peer.count("ns-a") == 3 and peer.count("ns-b") == 0
        found = peer.search("ns-a", "Ann adopted a grey cat called Pixel", 2)
        assert len(found) == 2 and "Pixel" in found[0].text
    finally:
        peer.close()
    # the in-memory store is saved after every session and put back on start (resume)
    again = LangMemPeer(tmp_path / "langmem", _langmem_model(), HashEmbeddings(), DIM)
    assert again.count("ns-a") == 3
    assert again.search("ns-a", "Ann adopted a grey cat called Pixel", 1)[0].id == found[0].id


@pytest.mark.parametrize("name", ["mem0", "langmem"])
def test_real_peer_rows_and_resume(name: str, tmp_path: Path, data_dir: str) -> None:
    skip_without(name)
    from benchmarks.peers.langmem_peer import LangMemPeer
    from benchmarks.peers.mem0_peer import Mem0Peer

    built: list[Any] = []

    def make(peer: str, store: Path, meter: UsageMeter) -> Any:
        cls, model = (Mem0Peer, _mem0_model()) if peer == "mem0" else (LangMemPeer, _langmem_model())
        built.append(cls(store, model, HashEmbeddings(), DIM))
        return built[-1]

    kw: dict[str, Any] = {"out_dir": tmp_path / "run", "make_peer": make, "ctx": AllMethodsContext(data_dir=data_dir),
                          "show_progress": False, "plots": False}
    run_peers(FIXTURE, [name], answer_model=answer_model(), **kw)
    rows = load_rows(tmp_path / "run" / JSONL_NAME, retry_errors=False)
    assert len(rows) == 5 and all(r["method"] == name and r["error"] is None for r in rows)
    by_q = {r["question_id"]: r for r in rows}
    assert by_q["conv-e1#0"]["prediction"] == "Pixel" and by_q["conv-e1#0"]["session_recall"] == 1.0
    log = (tmp_path / "run" / "peers" / name / "locomo-conv-e1.sessions.jsonl").read_text().splitlines()
    assert [json.loads(line)["stored_after"] for line in log] == [3, 6]
    model = answer_model()
    run_peers(FIXTURE, [name], answer_model=model, **kw)  # resumed: nothing left to do
    assert model.calls == [] and len(built) == 1
