"""Masked retrieval: dense top-k (optionally fused with BM25) that never returns a masked turn.

A unit (chunk, turn, summary…) is excluded as soon as any of its turn ids is masked. Dense search
over-fetches by exactly the number of excluded units, so the candidate pool is always full when
enough unmasked units exist. `ExternalRetriever` adapts any LangChain `BaseRetriever` whose
documents carry stable ids, so MemR3 can control a retriever it does not own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Protocol

import numpy as np

from recollect.memory.clock import timed_retrieval
from recollect.memory.vectors import Unit, VectorIndex

Rerank = Literal["none", "hybrid"]
RRF_K = 60


class SnippetSource(Protocol):
    def retrieve(self, query: str, masks: Iterable[str], top_k: int) -> list[Unit]: ...

    def has_unmasked(self, masks: Iterable[str]) -> bool | None: ...


class _Corpus:
    """All units of an index held in memory for BM25 and mask bookkeeping (rebuilt when it grows)."""

    def __init__(self, units: list[Unit]) -> None:
        self.units = units
        self.by_id = {u.id: u for u in units}
        self.turn_to_units: dict[str, list[str]] = {}
        for u in units:
            for t in u.turn_ids:
                self.turn_to_units.setdefault(t, []).append(u.id)
        self._bm25: Any = None

    def excluded(self, masks: set[str]) -> set[str]:
        out: set[str] = set()
        for t in masks:
            out.update(self.turn_to_units.get(t, ()))
        return out

    @timed_retrieval
    def bm25_ranking(self, query: str, excluded: set[str], n: int) -> list[str]:
        import bm25s

        if self._bm25 is None:
            # Index into a local and publish it when complete: a concurrent first query must never see
            # a half-built index.
            index = bm25s.BM25()
            index.index(bm25s.tokenize([u.text for u in self.units], stopwords="en", show_progress=False),
                        show_progress=False)
            self._bm25 = index
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        if not tokens:
            return []
        scores = np.asarray(self._bm25.get_scores(list(tokens)))
        order = np.argsort(-scores, kind="stable")
        out: list[str] = []
        for i in order:
            if scores[i] <= 0:
                break
            uid = self.units[int(i)].id
            if uid not in excluded:
                out.append(uid)
                if len(out) >= n:
                    break
        return out


_CORPORA: dict[tuple[int, str, str], tuple[int, _Corpus]] = {}


@timed_retrieval
def corpus_for(index: VectorIndex) -> _Corpus:
    key = (id(index.collection), index.kind, index.namespace)
    count = index.count()
    cached = _CORPORA.get(key)
    if cached and cached[0] == count:
        return cached[1]
    corpus = _Corpus(index.all())
    _CORPORA[key] = (count, corpus)
    return corpus


class MaskedRetriever:
    def __init__(self, index: VectorIndex, *, candidate_k: int = 20, rerank: Rerank = "none") -> None:
        self.index = index
        self.candidate_k = candidate_k
        self.rerank = rerank

    def has_unmasked(self, masks: Iterable[str]) -> bool:
        corpus = corpus_for(self.index)
        return len(corpus.excluded(set(masks))) < len(corpus.units)

    def dense(self, query: str, masks: Iterable[str], n: int) -> list[Unit]:
        corpus = corpus_for(self.index)
        excluded = corpus.excluded(set(masks))
        hits = self.index.query(query, n + len(excluded))
        return [u for u in hits if u.id not in excluded][:n]

    @timed_retrieval
    def retrieve(self, query: str, masks: Iterable[str], top_k: int) -> list[Unit]:
        masks = set(masks)
        dense = self.dense(query, masks, max(self.candidate_k, top_k))
        if self.rerank == "none":
            return dense[:top_k]
        corpus = corpus_for(self.index)
        sparse = corpus.bm25_ranking(query, corpus.excluded(masks), max(self.candidate_k, top_k))
        fused: dict[str, float] = {}
        for ranking in ([u.id for u in dense], sparse):
            for rank, uid in enumerate(ranking, start=1):
                fused[uid] = fused.get(uid, 0.0) + 1.0 / (RRF_K + rank)
        dense_by_id = {u.id: u for u in dense}
        order = sorted(fused, key=lambda uid: -fused[uid])[:top_k]
        out = []
        for uid in order:
            unit = dense_by_id.get(uid) or corpus.by_id[uid]
            out.append(Unit(unit.id, unit.text, list(unit.turn_ids), dict(unit.metadata), score=fused[uid]))
        return out


class ExternalRetriever:
    """Any LangChain `BaseRetriever` whose documents carry a stable id (`doc.id` or metadata `id`).

    Documents may list the turns they cover in metadata `turn_ids` (a list or comma-joined
    string); otherwise the document id itself is the turn id. Masked documents are filtered out
    after the call, since a foreign retriever cannot be asked to skip them.
    """

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever

    def has_unmasked(self, masks: Iterable[str]) -> bool | None:
        return None  # unknown: the retrieval-opportunity check falls back to the attempt budget

    @timed_retrieval
    def retrieve(self, query: str, masks: Iterable[str], top_k: int) -> list[Unit]:
        masks = set(masks)
        out: list[Unit] = []
        for doc in self.retriever.invoke(query):
            meta = dict(doc.metadata or {})
            uid = doc.id or meta.get("id")
            if not uid:
                raise ValueError("retriever returned a document without a stable id (doc.id or metadata['id'])")
            turns = meta.pop("turn_ids", None) or [str(uid)]
            if isinstance(turns, str):
                turns = [t.strip() for t in turns.split(",") if t.strip()]
            if masks & set(turns):
                continue
            out.append(Unit(id=str(uid), text=doc.page_content, turn_ids=list(turns), metadata=meta))
            if len(out) >= top_k:
                break
        return out
