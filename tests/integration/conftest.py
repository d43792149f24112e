"""Integration fixtures: the real embedded model and the real MiniLM embedder.

The llama.cpp server is started once per test session and stopped at the end. When the runtime
or the weights are not installed, every integration test skips with a one-line reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Context


def _why_unavailable() -> str | None:
    if os.environ.get("RECOLLECT_LLM_BASE_URL"):
        return None
    from app.llm.local_runtime import model_verified, runtime_installed

    if not runtime_installed():
        return "llama-cpp-python is not installed (run `make setup`)"
    if not model_verified():
        return "the local model file is missing or unverified (run `make setup`)"
    return None


@pytest.fixture(scope="session")
def chat_model() -> Iterator[object]:
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    from app.llm.models import default_chat_model, stop_local_server

    model = default_chat_model()
    yield model
    stop_local_server()


@pytest.fixture(scope="session")
def minilm_workspace(tmp_path_factory: pytest.TempPathFactory):
    from app.memory.embeddings import MiniLMEmbeddings
    from app.memory.workspace import Workspace, register_workspace

    data = tmp_path_factory.mktemp("integration-data")
    return register_workspace(Workspace(data, embeddings=MiniLMEmbeddings()))


@pytest.fixture(scope="session")
def local_ctx(minilm_workspace, chat_model) -> Context:
    """A context on a data dir whose namespace `sample` holds the sample dialogue."""
    return Context(data_dir=str(minilm_workspace.data_dir), chat_model=chat_model)


@pytest.fixture(scope="session")
def sample_file() -> Path:
    return Path(__file__).resolve().parents[2] / "examples" / "sample_dialogue.json"
