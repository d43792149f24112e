"""Shared fixtures. Unit tests run offline with the hashing embedder and scripted models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
    from app.ingest.loaders import load_conversation

    return load_conversation(SAMPLE)
