"""The shared turn ranking (recollect.memory.turn_ranking): exact cosine, or cosine and BM25 ranks fused over
each ranking's head, as MGRetrieval's rounds (`mg_turn_ranking`) and HyMem's turn ranking use it."""

from __future__ import annotations

import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.retriever import RRF_K
from recollect.memory.turn_ranking import ranked_turns, relevance, similarities, top_by_similarity
from recollect.memory.workspace import Workspace, open_workspace
from tests.helpers import make_conversation

TEXTS = [f"notes number {i} about the weather and the garden" for i in range(1, 31)] + [
    "the violin recital is on Friday"]
QUESTION = "violin"  # one word: only the last turn has a BM25 score


@pytest.fixture
def ws(data_dir: str) -> Workspace:
    ingest_conversation(make_conversation([[("Ann", t) for t in TEXTS]]), "ns", AllMethodsContext(data_dir=data_dir),
                        methods=[])
    return open_workspace(data_dir)


def test_cosine_relevance_is_the_similarity(ws: Workspace) -> None:
    ids = list(ws.turns("ns"))
    assert relevance(ws, "ns", QUESTION, ids, "cosine") == similarities(ws, "ns", QUESTION, ids)


def test_fused_relevance_adds_the_bm25_rank_and_scores_only_each_rankings_head(ws: Workspace) -> None:
    ids = list(ws.turns("ns"))
    sims = similarities(ws, "ns", QUESTION, ids)
    by_cosine = sorted(ids, key=lambda t: (-round(sims[t], 6), ids.index(t)))
    fused = relevance(ws, "ns", QUESTION, ids, "hybrid", pool=5)
    violin = ids[-1]
    cos_rank = by_cosine.index(violin) + 1
    expected = 1 / (RRF_K + 1) + (1 / (RRF_K + cos_rank) if cos_rank <= 5 else 0.0)
    assert fused[violin] == pytest.approx(expected, abs=1e-6)
    tail = by_cosine[5:]  # beyond the cosine head, without a BM25 score: the tie-break alone, below any rank
    assert all(fused[t] < 1e-6 for t in tail if t != violin)
    assert ranked_turns(ws, "ns", QUESTION, ids, 3, "hybrid")[0] == violin


def test_ranked_turns_ranks_even_when_nothing_is_cut_and_top_by_similarity_keeps_the_order(ws: Workspace) -> None:
    ids = list(ws.turns("ns"))
    assert ranked_turns(ws, "ns", QUESTION, ids, len(ids), "hybrid")[0] == ids[-1]
    assert top_by_similarity(ws, "ns", QUESTION, ids, len(ids), "hybrid") == ids  # a cap that cuts nothing
    assert ranked_turns(ws, "ns", QUESTION, ids, 0, "hybrid") == [] == ranked_turns(ws, "ns", QUESTION, [], 3)
