"""MGRetrieval end to end with the real local model on the sample dialogue (one easy question).

Only the first two sessions are ingested: the fact lives in session 1, and session 2 exercises the
vocabulary-matching call, which keeps the CPU time to ~4 LLM calls of ingestion.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.mgretrieval.vocabulary import KeywordVocabulary
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.workspace import open_workspace
from recollect.runner import ask

pytestmark = pytest.mark.integration
NS = "mgretrieval"


@pytest.fixture(scope="module")
def mg_ctx(local_ctx: AllMethodsContext, sample_file) -> AllMethodsContext:  # noqa: ANN001
    conv = load_conversation(sample_file)
    ingest_conversation(replace(conv, sessions=conv.sessions[:2]), NS, local_ctx, methods=["mgretrieval"])
    return local_ctx


def test_easy_question_is_answered_with_supports(mg_ctx: AllMethodsContext) -> None:
    ws = open_workspace(mg_ctx.data_dir)
    vocab = KeywordVocabulary.load(ws, NS)
    assert vocab.entries and any(ids for ids in vocab.phi.values())
    steps: list[dict] = []
    out = ask(NS, "What is the name of the dog Maya adopted?", "mgretrieval", mg_ctx, on_step=steps.append)
    assert "biscuit" in out["answer"].lower(), out["trace"]
    assert out["supports"], out["trace"]
    assert set(out["supports"]) <= set(ws.turns(NS))
    assert steps == out["trace"]
    roles = {r.get("llm_role") for r in out["trace"] if r["node"] in ("select_keywords", "assess", "rewrite")}
    assert roles <= {"aux", "main"}
    assert out["usage"]["by_node"]["assess"]["calls"] <= mg_ctx.mg_max_rounds
