"""The CLI's bad-input contract: one clear message, a non-zero exit, nothing stored is damaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recollect.cli import main
from recollect.memory.workspace import open_workspace


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ingested(data_dir: str, sample_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run(capsys, "--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3")
    assert code == 0 and "sample-maya-theo" in out
    return data_dir


def test_missing_file(capsys: pytest.CaptureFixture[str], data_dir: str, tmp_path: Path) -> None:
    code, _, err = run(capsys, "--data-dir", data_dir, "ingest", str(tmp_path / "nope.json"), "-n", "x")
    assert code == 2 and "nope.json" in err and err.startswith("error:")


def test_malformed_file(capsys: pytest.CaptureFixture[str], data_dir: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x", "sessions": [ {')
    code, _, err = run(capsys, "--data-dir", data_dir, "ingest", str(bad), "-n", "x")
    assert code == 2 and "bad.json" in err


def test_turn_without_text(capsys: pytest.CaptureFixture[str], data_dir: str, tmp_path: Path) -> None:
    bad = tmp_path / "notext.json"
    bad.write_text(json.dumps({"id": "c", "speakers": ["A", "B"], "sessions": [
        {"date_time": "1:00 pm on 1 May, 2023", "turns": [{"speaker": "A", "text": "hi"}, {"speaker": "B"}]}]}))
    code, _, err = run(capsys, "--data-dir", data_dir, "ingest", str(bad), "-n", "x")
    assert code == 2 and "notext.json" in err and "text" in err


def test_bad_file_leaves_existing_namespace_intact(
    capsys: pytest.CaptureFixture[str], ingested: str, tmp_path: Path
) -> None:
    before = dict(open_workspace(ingested).turns("demo"))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    code, _, _ = run(capsys, "--data-dir", ingested, "ingest", str(bad), "-n", "demo")
    assert code == 2 and open_workspace(ingested).turns("demo") == before


def test_unknown_namespace(capsys: pytest.CaptureFixture[str], ingested: str) -> None:
    code, _, err = run(capsys, "--data-dir", ingested, "ask", "who?", "-n", "ghost")
    assert code == 2 and "ghost" in err and "never been ingested" in err


def test_empty_question(capsys: pytest.CaptureFixture[str], ingested: str) -> None:
    code, _, err = run(capsys, "--data-dir", ingested, "ask", "  ", "-n", "demo")
    assert code == 2 and "empty" in err


def test_unreachable_endpoint_is_a_clear_error_and_resumable(
    capsys: pytest.CaptureFixture[str], ingested: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recollect.llm import models
    from recollect.settings import get_settings

    monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RECOLLECT_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("RECOLLECT_LLM_TIMEOUT_S", "2")
    get_settings.cache_clear()
    models._MODELS.clear()
    try:
        code, _, err = run(capsys, "--data-dir", ingested, "ask", "Who is Biscuit?", "-n", "demo", "--thread", "t1")
        assert code == 3 and "endpoint" in err.lower() and "--thread t1" in err
        code, out, _ = run(capsys, "--data-dir", ingested, "history", "t1")
        assert code == 0 and "next=router" in out  # the retrieve step is checkpointed
    finally:
        get_settings.cache_clear()
        models._MODELS.clear()


def test_unknown_setting(capsys: pytest.CaptureFixture[str], ingested: str) -> None:
    code, _, err = run(capsys, "--data-dir", ingested, "ask", "q?", "-n", "demo", "--set", "nope=1")
    assert code == 2 and "nope" in err


# --- options accepted without a word before (issue 37) --------------------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["ask", "q?", "-n", "demo", "-m", "rag", "--set", "hymem_light_k=3"],
     "'hymem_light_k' is not a setting of rag: it belongs to hymem"),
    (["ask", "q?", "-n", "demo", "-m", "memr3", "--set", "rag_top_k=3"],
     "'rag_top_k' is not a setting of memr3: it belongs to rag, full_context"),
    (["ingest", "nope.json", "-n", "demo", "--methods", "memr3", "--set", "hymem_light_k=3"],
     "'hymem_light_k' is not a setting of memr3: it belongs to hymem"),
    (["ask", "q?", "-n", "demo", "--set", "memr3_top_k=3", "--set", "memr3_top_k=4"], "'memr3_top_k' is given twice"),
    (["ask", "q?", "-n", "demo", "--thread", " "], "--thread: give a thread id"),
    (["--data-dir", "", "namespaces"], "--data-dir is empty"),
    (["serve", "--port", "-1"], "--port -1: a port is 0-65535"),
    (["serve", "--port", "70000"], "--port 70000: a port is 0-65535"),
    (["serve", "--host", ""], "--host is empty"),
    (["ingest", ".", "-n", "demo", "--methods", "memr3"], ".: is a directory, not a dialogue file"),
], ids=["other-method", "baseline-setting", "ingest-other-method", "twice", "blank-thread", "blank-data-dir",
        "negative-port", "port-too-big", "blank-host", "directory"])
def test_wrong_options_are_refused(capsys: pytest.CaptureFixture[str], ingested: str, argv: list[str],
                                   message: str) -> None:
    argv = argv if argv[0] == "--data-dir" else ["--data-dir", ingested, *argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("argv", [
    ["ask", "q?", "-n", "never", "-m", "rag", "--set", "max_prompt_tokens=2000", "--set", "rag_top_k=2"],
    ["ask", "q?", "-n", "never", "-m", "hymem", "--set", "profile=paper", "--set", "hymem_light_k=3"],
    ["ingest", "nope.json", "-n", "x", "--methods", "memr3,hymem", "--set", "hymem_turns_per_summary=2",
     "--set", "memr3_chunk_tokens=200", "--set", "answer_absolute_dates=false"],
    ["ingest", "nope.json", "-n", "x", "--set", "mg_keywords_per_memory=4"],  # every builder by default
])
def test_settings_of_the_methods_run_are_accepted(capsys: pytest.CaptureFixture[str], ingested: str,
                                                  argv: list[str]) -> None:
    code, _, err = run(capsys, "--data-dir", ingested, *argv)
    # past the settings: the namespace or the file is what fails
    assert code == 2 and "--set" not in err and ("never been ingested" in err or "nope.json" in err), err


def test_json_with_trace_keeps_standard_output_one_document(
    capsys: pytest.CaptureFixture[str], ingested: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recollect.llm import models
    from recollect.llm.scripted import scripted
    from tests.service.scripted_endpoint import scripted_callable

    monkeypatch.setattr(models, "default_chat_model", lambda: scripted(default=scripted_callable))
    code, out, err = run(capsys, "--data-dir", ingested, "ask", "What is the name of Maya's dog?", "-n", "demo",
                         "-m", "rag", "--json", "--trace")
    assert code == 0 and json.loads(out)["answer"] == "Biscuit"
    assert err.startswith("[rag] What is the name of Maya's dog?") and "retrieve" in err
