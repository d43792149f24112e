"""A question's relevance to a conversation's turns, shared by the methods that rank turns themselves
(MGRetrieval's rounds, HyMem's turn ranking).

Similarity is exact cosine over the shared `turns` collection's stored vectors, never the vector
index's approximate search, so a cap or a ranking picks the same turns on every run. "hybrid" fuses a
turn's cosine rank with its BM25 rank among the same candidates (reciprocal-rank fusion of each
ranking's head, as the chunk retriever's `hybrid` rerank does): a single turn's MiniLM vector often
misses the name or the rare noun the question and the turn share. Offline over the decisive eval's
questions, the first 20 turns of a conversation held 53.6 % of the gold turns by cosine and 64.5 % fused
(benchmarks/reports/turn_ranking).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from recollect.memory.embeddings import cosine_matrix
from recollect.memory.retriever import RRF_K, corpus_for
from recollect.memory.workspace import Workspace

TurnRanking = Literal["cosine", "hybrid"]
# Fuse only each ranking's head, as the chunk retriever's hybrid rerank fuses its `memr3_candidate_k`
# (20) candidates: BM25 scores every turn that shares a frequent question word ("what", "did"), and its
# long tail would outvote the cosine ranking
HYBRID_POOL = 20
TIE_SCALE = 1e-7  # the cosine tie-break: below the smallest difference of two fused ranks (~1e-5 at k=60)


def similarities(ws: Workspace, namespace: str, question: str, ids: list[str]) -> dict[str, float]:
    """Cosine of each turn to the question, from the shared turn collection's stored vectors."""
    if not ids:
        return {}
    index = ws.index("turns", namespace)
    got = index.collection.get(ids=ids, include=["embeddings"])
    vecs = {i: v for i, v in zip(got["ids"], got["embeddings"], strict=False) if v is not None}
    missing = [i for i in ids if i not in vecs]
    if missing:  # should not happen (turns are embedded at ingest), but never fail for it
        turns = ws.turns(namespace)
        texts = [f"{turns[i].speaker}: {turns[i].full_text}" if i in turns else i for i in missing]
        vecs.update(zip(missing, ws.embeddings.embed_documents(texts), strict=False))
    matrix: npt.NDArray[np.floating[Any]] = np.asarray([vecs[i] for i in ids], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1, norms)
    sims = cosine_matrix(ws.embeddings.embed_query(question), matrix)
    return {i: float(s) for i, s in zip(ids, sims, strict=False)}


def relevance(ws: Workspace, namespace: str, question: str, ids: list[str],
              ranking: TurnRanking = "cosine", pool: int = HYBRID_POOL) -> dict[str, float]:
    """Each turn's relevance to the question, higher first: its cosine ("cosine"), or ("hybrid") the
    reciprocal-rank fusion of the `pool` best cosine ranks and the `pool` best BM25 ranks among `ids`, a
    turn in neither pool scoring 0, with the cosine as tie-break (scaled far below one rank step)."""
    sims = similarities(ws, namespace, question, ids)
    if ranking == "cosine" or not ids:
        return sims
    by_cosine = sorted(range(len(ids)), key=lambda k: (-round(sims.get(ids[k], 0.0), 6), k))[:pool]
    fused = {tid: TIE_SCALE * (1.0 + sims.get(tid, 0.0)) for tid in ids}
    for rank, k in enumerate(by_cosine, start=1):
        fused[ids[k]] += 1.0 / (RRF_K + rank)
    corpus = corpus_for(ws.index("turns", namespace))
    candidates = set(ids)
    others = {u.id for u in corpus.units if u.id not in candidates}
    for rank, tid in enumerate(corpus.bm25_ranking(question, others, pool), start=1):
        fused[tid] += 1.0 / (RRF_K + rank)
    return fused


def ranked_turns(ws: Workspace, namespace: str, question: str, ids: list[str], n: int,
                 ranking: TurnRanking = "cosine") -> list[str]:
    """The n ids most relevant to the question (`relevance`), most relevant first; ties keep the given order."""
    if n <= 0 or not ids:
        return []
    scores = relevance(ws, namespace, question, ids, ranking, pool=max(HYBRID_POOL, n))
    ranked = sorted(range(len(ids)), key=lambda k: (-round(scores.get(ids[k], 0.0), 12), k))
    return [ids[k] for k in ranked[:n]]


def top_by_similarity(ws: Workspace, namespace: str, question: str, ids: list[str], n: int,
                      ranking: TurnRanking = "cosine") -> list[str]:
    """The n ids most relevant to the question (`ranked_turns`); all of them, in the given order, when they
    are no more than n (a cap that cuts nothing ranks nothing)."""
    if len(ids) <= n:
        return list(ids)
    return ranked_turns(ws, namespace, question, ids, n, ranking)
