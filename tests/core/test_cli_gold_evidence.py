"""`recollect ask --gold-evidence`: the trace marks where gold turns are shown, and the end names the stage
at which each gold turn was dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from recollect.cli import main
from tests.service.scripted_endpoint import ScriptedEndpoint


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> str:
    from recollect.llm import models
    from recollect.settings import get_settings

    with ScriptedEndpoint() as url:
        monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", url)
        get_settings.cache_clear()
        models._MODELS.clear()
        yield url
    get_settings.cache_clear()
    models._MODELS.clear()


def test_gold_evidence_names_each_turns_stage(capsys: pytest.CaptureFixture[str], data_dir: str, sample_path: Path,
                                              endpoint: str) -> None:
    assert main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3"]) == 0
    capsys.readouterr()
    code = main(["--data-dir", data_dir, "ask", "What is the name of Maya's dog?", "-n", "demo", "-m", "rag",
                 "--trace", "--gold-evidence", "D1:1, D9:9"])
    out = capsys.readouterr().out
    assert code == 0 and "answer: Biscuit" in out
    assert "gold evidence shown here: D1:1" in out  # under the step that showed it
    assert "evidence D1:1: kept: cited by the answer" in out
    assert "evidence D9:9: lost in memory" in out  # no such turn: no memory reaches it


def test_gold_evidence_without_ids_is_a_clear_error(capsys: pytest.CaptureFixture[str], data_dir: str,
                                                    sample_path: Path) -> None:
    assert main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3"]) == 0
    code = main(["--data-dir", data_dir, "ask", "dog?", "-n", "demo", "-m", "rag", "--gold-evidence", " , "])
    assert code == 2 and "--gold-evidence" in capsys.readouterr().err
