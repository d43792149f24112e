"""The MemR3 tests' memory: eight one-topic turns in two sessions, chunked small so retrieval has choices."""

from __future__ import annotations

import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from tests.helpers import make_conversation
from tests.methods.memr3.test_graph import TOPICS


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    conv = make_conversation([[("Ann", t) for t in TOPICS[:4]], [("Bob", t) for t in TOPICS[4:]]],
                             captions={"D1:1": "a grey cat on a sofa"})
    # The spec's answer step (no span rewrite): these tests count and script every call. They read the router's
    # schema as one object; test_decision_fields.py covers the default's one branch per decision. They walk the
    # paper's loop of 5 router calls (test_graph.py checks the default of 3).
    c = AllMethodsContext(data_dir=data_dir, memr3_chunk_tokens=20, memr3_top_k=2, memr3_rerank="none",
                          memr3_answer_rewrite=False, memr3_decision_fields=False, memr3_max_iterations=5)
    ingest_conversation(conv, "ns", c, methods=["memr3"])
    return c
