"""RECOLLECT_CHROMA_URL against a real Chroma server (`chroma run`, started here): two namespaces ingested
and answered with rag, memr3 and hymem keep their vectors in their own collections on the server and none
in the data directory; forgetting one deletes exactly its collections there; the vector calls the project
makes give the same results through the server's HTTP client as through the embedded one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.vectors import Unit, VectorIndex
from recollect.memory.workspace import NamespaceError, Workspace, register_workspace
from recollect.runner import ask, forget
from recollect.settings import get_settings
from tests.helpers import make_conversation
from tests.storage.conftest import server_client as _server_client

pytestmark = [pytest.mark.service]

LINE = re.compile(r"^\[(D\d+:\d+)\] ([^:\n]+): (.*)$", re.M)
CAT = re.compile(r"cat is called (\w+)")
Q = "What is Ann's cat called?"
ALICE = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "my dog is Rex the second")],
                           [("Ann", "I moved to Bergen"), ("Bob", "I bake bread")]], conv_id="alice-conv")
BOB = make_conversation([[("Ann", "my cat is called Miso"), ("Bob", "I play the cello")]], conv_id="bob-conv")


@pytest.fixture
def on_server(chroma_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("RECOLLECT_CHROMA_URL", chroma_server)
    get_settings.cache_clear()
    yield chroma_server
    monkeypatch.delenv("RECOLLECT_CHROMA_URL")
    get_settings.cache_clear()


def reader(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A scripted model that answers the cat's name only when the memory shown to it holds it."""
    title = kwargs["response_format"]["schema"]["title"]
    prompt = str(messages[-1].content)
    if title == "SummaryReply":
        return {"items": [{"text": f"{s}: {t}", "turn_ids": [i]} for i, s, t in LINE.findall(prompt)]}
    if title == "ReflectReply":
        return {"finished": 1}
    if title == "SelectReply":
        return {"selected": [0, 1, 2]}
    found = CAT.search(re.sub(r"(?m)^Question: .*$", "", prompt))  # the turns shown, wherever the layout puts them
    answer = found.group(1) if found else "No information available"
    if title.startswith("RouterDecision"):
        return {"evidence": [], "gaps": [], "decision": "answer", "detailed_answer": answer}
    if title in ("LightReply", "LightTurnsReply"):  # the light call reads summaries or turns
        return {"finished": 0 if found else 2, "answer": answer if found else "", "used": [0]}
    return {"answer": answer, "supports": []}


def _ours(client: Any, namespace: str) -> set[str]:
    return {c.name for c in client.list_collections() if c.name.partition("-")[2] == namespace}


def test_namespaces_live_on_the_server_and_forget_deletes_exactly_one(on_server: str, data_dir: str) -> None:
    ws = register_workspace(Workspace(data_dir, embeddings=HashEmbeddings()))
    assert ws.client.get_settings().chroma_server_host == "127.0.0.1"
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=ScriptedChatModel(default=reader))
    for namespace, conversation in (("alice", ALICE), ("bob", BOB)):
        ingest_conversation(conversation, namespace, ctx, methods=["memr3", "hymem"])
    for method in ("rag", "memr3", "hymem"):
        assert ask("alice", Q, method, ctx)["answer"] == "Pixel", method
        assert ask("bob", Q, method, ctx)["answer"] == "Miso", method

    server = _server_client(on_server)
    kinds = {"turns", f"memr3c{ctx.memr3_chunk_tokens}", "hymem_summaries"}
    assert _ours(server, "alice") == {f"{k}-alice" for k in kinds}
    assert _ours(server, "bob") == {f"{k}-bob" for k in kinds}
    assert server.get_collection("turns-alice").count() == 4 and server.get_collection("turns-bob").count() == 2
    assert not (Path(data_dir) / "chroma").exists()  # no embedded Chroma was opened

    # Another application's collection that only looks like ours survives the forget.
    server.get_or_create_collection("notes-alice", embedding_function=None)
    removed = forget("alice", ctx)
    assert removed["collections"] == 3
    assert _ours(server, "alice") == {"notes-alice"}
    assert _ours(server, "bob") == {f"{k}-bob" for k in kinds}
    for method in ("rag", "memr3", "hymem"):
        assert ask("bob", Q, method, ctx)["answer"] == "Miso", method
    with pytest.raises(NamespaceError, match="never been ingested"):
        ask("alice", Q, "rag", ctx)

    # A process that cached the old handles sees the re-ingest (the stale-handle check works over HTTP).
    ingest_conversation(ALICE, "alice", ctx, methods=["memr3"])
    assert ask("alice", Q, "rag", ctx)["answer"] == "Pixel"
    assert not (Path(data_dir) / "chroma").exists()


def _exercise(client: Any) -> dict[str, Any]:
    """Every vector call the project makes (VectorIndex's and the raw collection calls of HyMem and
    MGRetrieval), with what each returns."""
    index = VectorIndex(client, "turns", "parity", HashEmbeddings())
    units = [Unit(id=f"D{s}:{k}", text=f"turn {s}.{k} about {word}", turn_ids=[f"D{s}:{k}"],
                  metadata={"session": s, "date_time": f"{s} May, 2023", "order": s * 100000 + k, "weight": 0.5 * k,
                            "flag": k % 2 == 0, "tags": ["a", "b"]})
             for s in (1, 2) for k, word in enumerate(("cats", "dogs", "bread", "cello"), start=1)]
    out: dict[str, Any] = {"embedded": index.upsert(units), "again": index.upsert(units)}
    units[0] = Unit(units[0].id, "turn 1.1 about a grey cat", units[0].turn_ids, units[0].metadata)
    out["changed"] = index.upsert(units)
    units[1] = Unit(units[1].id, units[1].text, units[1].turn_ids, {**units[1].metadata, "weight": 9.0})
    out["relabelled"] = (index.upsert(units), index.get([units[1].id])[0].metadata["weight"])  # no re-embedding
    out["count"] = index.count()
    out["get"] = [u.as_dict() for u in index.get(["D2:3", "missing", "D1:1"])]
    out["all"] = sorted((u.as_dict() for u in index.all()), key=lambda d: d["id"])
    # Two hits with distinct scores: ties (a hashing embedder has many) come back in no fixed order.
    out["query"] = [(u.id, round(u.score, 4), u.as_dict()) for u in index.query("grey cat turn 1.1 about bread", 2)]
    out["where"] = sorted(index.collection.get(where={"session": 2}, include=[])["ids"])
    got = index.collection.get(ids=["D1:2", "D2:4"], include=["embeddings"])
    out["embeddings"] = {i: np.round(np.asarray(v, dtype=np.float64), 5).tolist()
                         for i, v in zip(got["ids"], got["embeddings"], strict=True)}
    index.delete(["D1:1", "D2:2"])
    out["after_delete"] = (index.count(), sorted(u.id for u in index.all()))
    out["marker"] = index.collection.metadata
    client.delete_collection(index.collection.name)
    return out


def test_vector_calls_give_the_same_results_through_the_server(chroma_server: str, tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    embedded = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False))
    here, there = _exercise(embedded), _exercise(_server_client(chroma_server))
    assert here["get"][0]["id"] == "D2:3" and here["all"][0]["tags"] == ["a", "b"] and here["changed"] == 1
    assert here["relabelled"] == (0, 9.0)
    assert [hit[0] for hit in here["query"]] == ["D1:1", "D1:3"]
    assert there == here
