"""HyMem end to end with the real local model on the sample dialogue (4 summary calls + 2–7 calls)."""

from __future__ import annotations

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.hymem.memory import load_summaries
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.workspace import open_workspace
from recollect.runner import ask

pytestmark = pytest.mark.integration

NS = "hymem"


@pytest.fixture(scope="module")
def hymem_ctx(local_ctx: AllMethodsContext, sample_file) -> AllMethodsContext:  # noqa: ANN001
    conv = load_conversation(sample_file)
    reports = ingest_conversation(conv, NS, local_ctx, methods=["hymem"])
    assert reports[-1].llm_calls + reports[-1].cached_calls >= len(conv.sessions) or reports[-1].embedded == 0
    return local_ctx


def test_hymem_summaries_link_real_turns(hymem_ctx: AllMethodsContext) -> None:
    ws = open_workspace(hymem_ctx.data_dir)
    turns = ws.turns(NS)
    summaries = load_summaries(ws, NS)
    assert summaries
    assert all(s["turn_ids"] and set(s["turn_ids"]) <= set(turns) for s in summaries.values())


def test_hymem_answers_an_easy_question_with_supports(hymem_ctx: AllMethodsContext) -> None:
    out = ask(NS, "What is the name of the dog Maya adopted?", "hymem", hymem_ctx)
    assert "biscuit" in out["answer"].lower(), out["trace"]
    turns = open_workspace(hymem_ctx.data_dir).turns(NS)
    assert out["supports"] and set(out["supports"]) <= set(turns), out["trace"]
    assert out["usage"]["calls"] <= 7 + 7  # the per-question budget, plus at most one retry per call
    assert any(r["node"] == "answer" and r.get("answered_by") for r in out["trace"])
