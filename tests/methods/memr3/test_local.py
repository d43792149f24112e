"""MemR3 and both baselines end to end with the real local model on the sample dialogue."""

from __future__ import annotations

import pytest

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.workspace import open_workspace
from recollect.runner import ask

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sample_ctx(local_ctx: AllMethodsContext, sample_file) -> AllMethodsContext:  # noqa: ANN001
    ingest_conversation(load_conversation(sample_file), "sample", local_ctx, methods=["memr3"])
    return local_ctx


@pytest.mark.parametrize("method", ["memr3", "rag", "full_context"])
def test_easy_question_is_answered_with_supports(sample_ctx: AllMethodsContext, method: str) -> None:
    steps: list[dict] = []
    out = ask("sample", "What is the name of the dog Maya adopted?", method, sample_ctx, on_step=steps.append)
    assert "biscuit" in out["answer"].lower(), out["trace"]
    turns = open_workspace(sample_ctx.data_dir).turns("sample")
    assert out["supports"], out["trace"]
    assert set(out["supports"]) <= set(turns)
    assert steps and steps == out["trace"]
    assert out["usage"]["calls"] >= 1 and out["usage"]["prompt_tokens"] > 0
