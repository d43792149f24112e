"""Chroma-backed vector indexes, one collection per (kind, namespace).

A collection per namespace makes the namespace wall structural: a query can only ever see the
collection it was opened on. Embeddings are computed by our own embedder and passed explicitly,
so Chroma never loads (or downloads) a default embedding function. Upserts skip ids whose text is
unchanged, so re-ingesting re-embeds nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from recollect.memory.clock import timed_retrieval

COUNT_TTL_S = 2.0
# Collection metadata naming the kind: on a shared Chroma server it tells our collections from others'
# (a collection that already exists keeps the metadata it was made with).
KIND_MARKER = "recollect_kind"
LOOKUP_BATCH = 5000


@dataclass
class Unit:
    """A retrievable unit: a turn, a chunk of turns, a summary, an event sentence…"""

    id: str
    text: str
    turn_ids: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "turn_ids": list(self.turn_ids), **self.metadata}


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _flat_meta(meta: dict[str, Any]) -> dict[str, Any]:
    # Chroma metadata values must be scalars: lists and dicts travel as JSON strings.
    out: dict[str, Any] = {}
    for k, v in meta.items():
        if v is None:
            continue
        out[k] = json.dumps(v) if isinstance(v, list | dict | tuple) else v
    return out


def _unflat_meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (meta or {}).items():
        if isinstance(v, str) and v[:1] in "[{":
            try:
                out[k] = json.loads(v)
                continue
            except json.JSONDecodeError:
                pass
        out[k] = v
    return out


class VectorIndex:
    def __init__(self, client: Any, kind: str, namespace: str, embeddings: Embeddings) -> None:
        if "-" in kind:  # collections are named "<kind>-<namespace>"; forget splits at the first '-'
            raise ValueError(f"vector index kind {kind!r} must not contain '-'")
        self.kind = kind
        self.namespace = namespace
        self.embeddings = embeddings
        self.collection = client.get_or_create_collection(
            name=f"{kind}-{namespace}", metadata={"hnsw:space": "cosine", KIND_MARKER: kind}, embedding_function=None
        )
        self._count: tuple[float, int] | None = None

    def count(self) -> int:
        # Counting is a round trip into Chroma; cache it briefly (writes here invalidate it at once,
        # writes from another process are seen within COUNT_TTL_S).
        now = time.monotonic()
        if self._count is None or now - self._count[0] > COUNT_TTL_S:
            self._count = (now, int(self.collection.count()))
        return self._count[1]

    def upsert(self, units: list[Unit], batch: int = 256) -> int:
        """Insert or update units; returns how many were (re-)embedded. A unit whose text is unchanged keeps
        its embedding; its metadata is updated where it changed (MRAgent's event keeps its sentence when a
        rebuild changes its tag or date)."""
        if not units:
            return 0
        known: dict[str, dict[str, Any]] = {}
        for start in range(0, len(units), LOOKUP_BATCH):  # SQLite caps the variables per statement
            ids = [u.id for u in units[start : start + LOOKUP_BATCH]]
            existing = self.collection.get(ids=ids, include=["metadatas"])
            known.update({i: dict(m or {}) for i, m in zip(existing["ids"], existing["metadatas"], strict=False)})
        meta = {u.id: _flat_meta({**u.metadata, "turn_ids": u.turn_ids, "_text_hash": _text_hash(u.text)})
                for u in units}
        todo = [u for u in units if known.get(u.id, {}).get("_text_hash") != meta[u.id]["_text_hash"]]
        embed = {u.id for u in todo}
        stale = [u.id for u in units if u.id in known and u.id not in embed and known[u.id] != meta[u.id]]
        self._count = None
        for start in range(0, len(stale), batch):
            part_ids = stale[start : start + batch]
            self.collection.update(ids=part_ids, metadatas=[meta[i] for i in part_ids])
        for start in range(0, len(todo), batch):
            part = todo[start : start + batch]
            vecs = self.embeddings.embed_documents([u.text for u in part])
            self.collection.upsert(
                ids=[u.id for u in part],
                embeddings=vecs,
                documents=[u.text for u in part],
                metadatas=[meta[u.id] for u in part],
            )
        return len(todo)

    def delete(self, ids: list[str]) -> None:
        if ids:
            self.collection.delete(ids=ids)
            self._count = None

    def _units(self, res: dict[str, Any], nested: bool) -> list[Unit]:
        ids = res["ids"][0] if nested else res["ids"]
        docs = res["documents"][0] if nested else res["documents"]
        metas = res["metadatas"][0] if nested else res["metadatas"]
        dists = res["distances"][0] if nested and res.get("distances") else [None] * len(ids)
        out = []
        for i, d, m, dist in zip(ids, docs, metas, dists, strict=False):
            meta = _unflat_meta(m)
            meta.pop("_text_hash", None)
            turn_ids = meta.pop("turn_ids", [])
            out.append(Unit(id=i, text=d or "", turn_ids=list(turn_ids), metadata=meta,
                            score=0.0 if dist is None else 1.0 - float(dist)))
        return out

    @timed_retrieval
    def all(self) -> list[Unit]:
        res = self.collection.get(include=["documents", "metadatas"])
        return self._units(res, nested=False)

    @timed_retrieval
    def get(self, ids: list[str]) -> list[Unit]:
        if not ids:
            return []
        res = self.collection.get(ids=ids, include=["documents", "metadatas"])
        by_id = {u.id: u for u in self._units(res, nested=False)}
        return [by_id[i] for i in ids if i in by_id]

    @timed_retrieval
    def query_vector(self, vector: list[float], n: int) -> list[Unit]:
        """Units by descending cosine similarity to `vector` (at most n)."""
        total = self.count()
        if total == 0 or n <= 0:
            return []
        res = self.collection.query(
            query_embeddings=[vector], n_results=min(n, total), include=["documents", "metadatas", "distances"]
        )
        return self._units(res, nested=True)

    def query(self, text: str, n: int) -> list[Unit]:
        return self.query_vector(self.embeddings.embed_query(text), n)
