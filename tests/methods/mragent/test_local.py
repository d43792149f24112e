"""MRAgent end to end with the real local model: ingest the sample dialogue, ask one easy question."""

from __future__ import annotations

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.mragent.graph import graph, recursion_limit
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.workspace import open_workspace

pytestmark = pytest.mark.integration


def test_mragent_answers_an_easy_question(local_ctx: AllMethodsContext, sample_file) -> None:  # noqa: ANN001
    conversation = load_conversation(sample_file)
    reports = ingest_conversation(conversation, "mragent", local_ctx, methods=["mragent"])
    report = reports[-1]
    # 2 calls per window (retries only on invalid JSON); a second ingest is free
    assert report.sessions == len(conversation.sessions)
    again = ingest_conversation(conversation, "mragent", local_ctx, methods=["mragent"])[-1]
    assert again.llm_calls == 0

    # A smaller round budget keeps the CI run short; the loop logic is covered by the unit tests.
    ctx = local_ctx.with_overrides(mra_max_rounds=4)
    *_, out = graph.stream({"namespace": "mragent", "question": "What is the name of Maya's dog?"},
                           {"recursion_limit": recursion_limit(ctx)}, context=ctx, stream_mode="values")
    assert out["answer"].strip()
    assert "biscuit" in out["answer"].lower()
    turns = open_workspace(ctx.data_dir).turns("mragent")
    assert out["supports"] and all(s in turns for s in out["supports"])
    # The agent explored: at least one traversal tool ran without an error (a model that only ever
    # answers from the seed is plain retrieval, not MRAgent). `tools` records list each call's result.
    results = [res for rec in out["trace"] if rec["node"] == "tools" for res in rec["results"]]
    assert any(res["error"] is None for res in results), [r["node"] for r in out["trace"]]
    # every turn whose text the model was shown is a known turn, and was shown by a prompt
    shown = [t for rec in out["trace"] for t in rec.get("shown_turn_ids") or []]
    assert shown and set(shown) <= set(turns)
