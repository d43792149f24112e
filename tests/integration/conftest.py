"""Integration fixtures: a MiniLM workspace and a context on the real model (`chat_model`,
defined in tests/conftest.py so the service tests share the same server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recollect.graphs.registry import AllMethodsContext


@pytest.fixture(scope="session")
def minilm_workspace(tmp_path_factory: pytest.TempPathFactory):
    from recollect.memory.embeddings import MiniLMEmbeddings
    from recollect.memory.workspace import Workspace, register_workspace

    data = tmp_path_factory.mktemp("integration-data")
    return register_workspace(Workspace(data, embeddings=MiniLMEmbeddings()))


@pytest.fixture(scope="session")
def local_ctx(minilm_workspace, chat_model) -> AllMethodsContext:
    """A context on a data dir whose namespace `sample` holds the sample dialogue."""
    return AllMethodsContext(data_dir=str(minilm_workspace.data_dir), chat_model=chat_model)


@pytest.fixture(scope="session")
def sample_file() -> Path:
    return Path(__file__).resolve().parents[2] / "examples" / "sample_dialogue.json"
