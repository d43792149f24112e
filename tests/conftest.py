"""Shared fixtures. Unit tests run offline with the hashing embedder and scripted models."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from recollect.graphs.registry import AllMethodsContext

os.environ.setdefault("RECOLLECT_EMBEDDER", "hash")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample_dialogue.json"


@pytest.fixture
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "data")


@pytest.fixture
def sample_conversation():
    from recollect.dialogue.loaders import load_conversation

    return load_conversation(SAMPLE)


# --- the real model (integration and service tests) ----------------------------------------------
# The llama.cpp server is started once per test session and stopped at the end. When the runtime or
# the weights are not installed, every test that needs it skips with a one-line reason.


def _why_unavailable() -> str | None:
    if os.environ.get("RECOLLECT_LLM_BASE_URL"):
        return None
    from recollect.llm.local_runtime import model_verified, runtime_installed

    if not runtime_installed():
        from recollect.settings import get_settings

        return f"the llama.cpp runtime ({get_settings().local_runtime}) is not installed (run `make setup`)"
    if not model_verified():
        return "the local model file is missing or unverified (run `make setup`)"
    return None


@pytest.fixture(scope="session")
def chat_model() -> Iterator[object]:
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    from recollect.llm.models import default_chat_model, stop_local_server

    model = default_chat_model()
    yield model
    stop_local_server()


# --- a MiniLM workspace and a context on the real model (integration tests of every area) ------------


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
    return SAMPLE


# --- selection: a test that uses the real model is an integration test, marked or not ---------------
REAL_MODEL_FIXTURES = frozenset({"chat_model", "local_ctx"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make unit` (-m "not integration and not service") must never start the llama.cpp model: a test
    asking for a real-model fixture gets the `integration` marker even if its module forgot it."""
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and "integration" not in item.keywords:
            item.add_marker(pytest.mark.integration)
