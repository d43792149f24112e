"""Shared by the fault tests (fuzzed replies, fallback rebuilds, killed ingests): a model that answers every
builder's ingestion prompt with a valid reply that has content, and a canonical dump of what a namespace
stores, to compare a build with a clean one. No real model, no network."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel, scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.store_docs import CACHE_KIND, StoreDocs, ns_label
from recollect.memory.store_docs import ROOT as STORE_ROOT
from recollect.memory.vectors import VectorIndex
from recollect.memory.workspace import Workspace, storage_name
from recollect.runner import ask
from tests.service.scripted_endpoint import schema_reply, scripted_callable

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample_dialogue.json"

_MRA_TURN = re.compile(r"^(\d+) \| ([^:\n]+): (.*)$", re.M)  # MRAgent's compact call A
_MG_TURN = re.compile(r"^\[(\d+)\] ([^:\n]+): (.*)$", re.M)  # MGRetrieval's compact extraction
_MG_CANDIDATE = re.compile(r"^(\d+)\. (.+?) -> 1\) ([^,\n]+)", re.M)  # MGRetrieval's compact matching
_HYMEM_TURN = re.compile(r"^\[(D\d+:\d+)\] ([^:\n]+): (.*)$", re.M)  # HyMem's session text


def _words(text: str, n: int) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)][:n]


def builder_reply(prompt: str, response_format: dict[str, Any] | None) -> str:
    """A valid reply with content for each builder's ingestion prompt (default settings: MRAgent compact
    with the turns as sentences and lexical cues, MGRetrieval compact, HyMem dense; MRAgent's sentences
    call too); any other prompt gets `schema_reply`."""
    if prompt.startswith("Index this conversation session"):  # mra_ingest_sentences="turn": a row per turn
        turns = _MRA_TURN.findall(prompt)
        return json.dumps({"topics": ["daily life"], "facts": [[int(turns[0][0]), turns[0][1], "life", turns[0][2]]],
                           "turns": [[int(n), _words(text, 1)[0] if _words(text, 1) else "chat", [1], ""]
                                     for n, spk, text in turns]})
    if prompt.startswith("Rewrite this conversation session"):
        turns = _MRA_TURN.findall(prompt)
        return json.dumps({"topics": ["daily life"], "facts": [[int(turns[0][0]), turns[0][1], "life", turns[0][2]]],
                           "sentences": [[int(n), f"{spk} said: {text}", "chat", [1], ""] for n, spk, text in turns]})
    if prompt.startswith("List search keywords"):
        return json.dumps({n: ", ".join([spk.lower(), *_words(text, 3)]) for n, spk, text in _MG_TURN.findall(prompt)})
    if prompt.startswith("Keep a keyword vocabulary"):
        # The first listed entry when it shares the keyword's first four letters, else a new entry.
        return json.dumps({n: int(kw[:4] == entry[:4]) for n, kw, entry in _MG_CANDIDATE.findall(prompt)})
    if prompt.startswith("Write the key information"):
        return json.dumps({"items": [{"text": f"{spk} said: {text}", "turn_ids": [tid]}
                                     for tid, spk, text in _HYMEM_TURN.findall(prompt)]})
    return schema_reply(prompt, response_format)


def good_reply(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """`builder_reply` as a `ScriptedChatModel` reply."""
    return builder_reply("\n".join(str(m.content) for m in messages), kwargs.get("response_format"))


def good_model() -> ScriptedChatModel:
    return ScriptedChatModel(default=good_reply)


def empty_reply(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """Replies that parse and fit the schema but hold nothing: no keyword, no sentence, no summary item
    (issue 37: MGRetrieval kept the fallback keywords of such a reply, and never asked again)."""
    prompt = "\n".join(str(m.content) for m in messages)
    if prompt.startswith("List search keywords"):
        return "[]"
    if prompt.startswith("Rewrite this conversation session"):
        return '{"topics": [], "facts": [], "sentences": []}'
    if prompt.startswith("Index this conversation session"):
        return '{"topics": [], "facts": [], "turns": []}'
    if prompt.startswith("Write the key information"):
        return '{"items": []}'
    return good_reply(messages, kwargs)


# Stored per ingest, not memory: a fresh id per `store_turns` (so other processes see a re-ingest), and the
# calls an MGRetrieval session record counts (none when its replies came from the LLM cache).
_VOLATILE_KINDS = {"turns_version"}
_VOLATILE_FIELDS = {"mg_session": ("usage",)}
# Kinds every reader sorts (HyMem's by session and item order): their stored order is no part of the memory.
_READ_SORTED = {"hymem_session", "hymem_summaries"}


def _doc_rows(ws: Workspace, namespace: str) -> list[tuple[str, str, Any]]:
    """(kind, key, value) of the namespace's documents and its registry entry, in stored order, from
    whichever document store the data directory uses."""
    if isinstance(ws.docs, StoreDocs):
        prefix = (STORE_ROOT, ns_label(namespace))
        kinds = sorted({ns[2] for ns in ws.docs.store.list_namespaces(prefix=prefix, limit=100_000)} - {CACHE_KIND})
        rows = [(kind, key, value) for kind in kinds for key, value in ws.docs.items(namespace, kind).items()]
        entry = ws.docs.get("", "namespace", namespace)
        return rows + ([("namespace", namespace, entry)] if entry is not None else [])
    with sqlite3.connect(Path(ws.data_dir) / "recollect.db") as conn:
        found = conn.execute("SELECT kind, key, value FROM docs WHERE namespace=? OR (namespace='' AND "
                             "kind='namespace' AND key=?) ORDER BY rowid", (namespace, namespace)).fetchall()
    return [(kind, key, json.loads(value)) for kind, key, value in found]


def memory_dump(data_dir: str | Path, namespace: str) -> dict[str, Any]:
    """Everything a namespace stores, canonically: its documents per kind in stored order (a read side may
    follow it) with its registry entry, and every Chroma collection's ids, documents and metadata."""
    docs: dict[str, list[Any]] = {}
    ws = Workspace(data_dir, embeddings=HashEmbeddings())
    for kind, key, doc in _doc_rows(ws, namespace):
        if kind in _VOLATILE_KINDS:
            continue
        for name in _VOLATILE_FIELDS.get(kind, ()):
            doc.pop(name, None)
        docs.setdefault(kind, []).append([key, doc])
    for kind in _READ_SORTED & set(docs):
        docs[kind].sort(key=lambda item: item[0])
    suffix = "-" + storage_name(namespace)
    vectors: dict[str, list[Any]] = {}
    for collection in ws.client.list_collections():
        name = collection if isinstance(collection, str) else collection.name
        if name.endswith(suffix):
            got = ws.client.get_collection(name).get(include=["documents", "metadatas"])
            vectors[name] = sorted(zip(got["ids"], got["documents"], got["metadatas"], strict=True))
    return {"docs": dict(sorted(docs.items())), "vectors": vectors}


def exact_query(self: VectorIndex, vector: list[float], n: int) -> list[Any]:
    """Chroma's query by exact cosine with ties broken by id. The hashing embedder gives many units the same
    score, and the HNSW index orders equal scores differently in two builds of the same units."""
    got = self.collection.get(include=["embeddings", "documents", "metadatas"])
    if not got["ids"]:
        return []
    vecs = np.asarray(got["embeddings"], dtype=np.float64)
    query = np.asarray(vector, dtype=np.float64)
    norms = np.linalg.norm(vecs, axis=1) * (np.linalg.norm(query) or 1.0)
    dists = 1.0 - (vecs @ query) / np.where(norms == 0, 1.0, norms)
    order = sorted(range(len(got["ids"])), key=lambda i: (round(float(dists[i]), 9), got["ids"][i]))[:n]
    res = {k: [[got[k][i] for i in order]] for k in ("ids", "documents", "metadatas")}
    return self._units({**res, "distances": [[float(dists[i]) for i in order]]}, nested=True)


def question_requests(data_dir: str | Path, methods: Iterable[str], questions: Sequence[str],
                      namespace: str = "ns") -> dict[str, list[str]]:
    """The prompts each method sends for `questions`: equal memories make equal requests."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VectorIndex, "query_vector", exact_query)
        for method in methods:
            model = scripted(default=scripted_callable)
            for question in questions:
                ask(namespace, question, method, AllMethodsContext(data_dir=str(data_dir), chat_model=model))
            out[method] = model.prompts()
    return out
