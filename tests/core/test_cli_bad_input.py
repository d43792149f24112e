"""Bad CLI input beyond the dialogue file: unusable data directories, damaged stores, dialogues with no
turn, empty method lists. Each is one `error:` line, a non-zero exit, and nothing stored changes.
No model is reachable: every case fails before a model call."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recollect.cli import main
from recollect.llm import models
from recollect.memory.workspace import Workspace, open_workspace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("this test must fail before any model call")

    monkeypatch.setattr(models, "default_chat_model", refuse)
    monkeypatch.setattr(models, "aux_chat_model", refuse)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under `root` by content: what a failing command must leave as it was."""
    if root.is_file():
        return {root.name: hashlib.sha256(root.read_bytes()).hexdigest()}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def ingested(data_dir: str, sample_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, _, _ = run(capsys, "--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3")
    assert code == 0
    return Path(data_dir)


COMMANDS = [
    ["namespaces"],
    ["ingest", "sample", "-n", "demo", "--methods", "memr3"],
    ["ask", "Who is Biscuit?", "-n", "demo", "-m", "rag"],
    ["forget", "demo"],
    ["history", "t1"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("where", ["is-a-file", "under-a-file"])
def test_data_dir_that_is_or_lies_under_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str, command: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    data_dir = blocker if where == "is-a-file" else blocker / "sub" / "data"
    code, out, err = run(capsys, "--data-dir", str(data_dir), *command)
    assert code == 2 and out == "" and one_error_line(err), err
    assert str(blocker) in err and "is a file" in err
    assert blocker.read_text() == "not a directory"


def _as_unprivileged() -> list[str] | None:
    """A prefix under which file permissions apply to this test's commands; None when there is none."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    # root with the capabilities that bypass file permissions dropped: chmod applies again
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}"]


def cli_unprivileged(data_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    prefix = _as_unprivileged()
    if prefix is None:
        pytest.skip("running as root without setpriv: file permissions cannot be enforced")
    env = dict(os.environ, RECOLLECT_EMBEDDER="hash", RECOLLECT_LLM_BASE_URL="http://127.0.0.1:9/v1",
               RECOLLECT_LLM_MAX_RETRIES="0", PYTHONPATH=str(ROOT))
    return subprocess.run([*prefix, sys.executable, "-m", "recollect.cli", "--data-dir", str(data_dir), *argv],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


@pytest.fixture
def read_only(request: pytest.FixtureRequest) -> Iterator[list[Path]]:
    """Paths to make read-only for a test; writable again afterwards so tmp_path can be removed."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        for q in [p, *p.rglob("*")] if p.is_dir() else [p]:
            q.chmod(q.stat().st_mode | 0o200)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] not in ("namespaces", "history")], ids=lambda c: c[0])
def test_read_only_data_dir(ingested: Path, read_only: list[Path], command: list[str]) -> None:
    before = fingerprint(ingested)
    for p in [ingested, *ingested.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    read_only.append(ingested)
    done = cli_unprivileged(ingested, *command)
    assert done.returncode == 2 and done.stdout == "" and one_error_line(done.stderr), done.stderr
    assert "not writable" in done.stderr and str(ingested.name) in done.stderr
    assert fingerprint(ingested) == before


def test_read_only_commands_read_a_read_only_data_dir(ingested: Path, read_only: list[Path]) -> None:
    """Issue 37: `namespaces` and `history` only read, yet refused a data directory they could not write."""
    from recollect.graphs.registry import AllMethodsContext
    from recollect.llm.scripted import scripted
    from recollect.runner import ask, close_checkpointer, open_checkpointer
    from tests.service.scripted_endpoint import scripted_callable

    saver = open_checkpointer(str(ingested))
    try:
        ask("demo", "What is the name of Maya's dog?", "rag", AllMethodsContext(
            data_dir=str(ingested), chat_model=scripted(default=scripted_callable)), checkpointer=saver, thread_id="t1")
    finally:
        close_checkpointer(saver)
    for p in [ingested, *ingested.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    read_only.append(ingested)
    before = fingerprint(ingested)
    done = cli_unprivileged(ingested, "namespaces")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("demo: conversation=sample-maya-theo sessions=4") and "built=memr3" in done.stdout
    done = cli_unprivileged(ingested, "history", "t1")
    assert done.returncode == 0 and "question: What is the name of Maya's dog?" in done.stdout, done.stderr
    assert "answer='Biscuit'" in done.stdout
    done = cli_unprivileged(ingested, "history", "t2")
    assert done.returncode == 2 and one_error_line(done.stderr) and "no thread 't2'" in done.stderr, done.stderr
    assert fingerprint(ingested) == before


def test_history_of_an_unknown_thread_leaves_no_file(capsys: pytest.CaptureFixture[str], ingested: Path) -> None:
    def stored() -> dict[str, str]:  # SQLite's shared-memory index changes on a read; nothing else may
        return {name: digest for name, digest in fingerprint(ingested).items() if not name.endswith("-shm")}

    before = stored()
    code, out, err = run(capsys, "--data-dir", str(ingested), "history", "nope")
    assert code == 2 and out == "" and one_error_line(err) and "no thread 'nope'" in err, err
    assert stored() == before  # no checkpoints.sqlite made to say so


def test_fresh_read_only_data_dir_and_one_under_it(tmp_path: Path, read_only: list[Path]) -> None:
    parent = tmp_path / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    read_only.append(parent)
    for data_dir in (parent, parent / "data"):
        done = cli_unprivileged(data_dir, "ingest", "sample", "-n", "demo", "--methods", "memr3")
        assert done.returncode == 2 and one_error_line(done.stderr) and "not writable" in done.stderr, done.stderr
        listed = cli_unprivileged(data_dir, "namespaces")  # nothing to list, and nothing made to list it
        assert listed.returncode == 0 and listed.stdout == listed.stderr == "", listed.stderr
    assert list(parent.iterdir()) == []


def test_read_only_database_file(ingested: Path, read_only: list[Path]) -> None:
    from recollect.settings import get_settings

    name = "store.sqlite" if get_settings().doc_store == "langgraph" else "recollect.db"  # the documents' file
    db = ingested / name
    before = fingerprint(ingested)
    db.chmod(0o444)
    read_only.append(db)
    done = cli_unprivileged(ingested, "ask", "Who is Biscuit?", "-n", "demo", "-m", "rag")
    assert done.returncode == 2 and one_error_line(done.stderr), done.stderr
    assert f"{name} is read-only" in done.stderr
    assert fingerprint(ingested) == before


@pytest.mark.parametrize("name", ["recollect.db", "checkpoints.sqlite"])
def test_damaged_database_names_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / name).write_bytes(b"this is not an SQLite database, " * 8)
    code, _, err = run(capsys, "--data-dir", str(data_dir), "history", "t1")
    assert code == 2 and one_error_line(err) and name in err and "not a database" in err, err


def test_storage_failure_underneath_is_one_line(
    capsys: pytest.CaptureFixture[str], data_dir: str, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Workspace, "store_turns", full_disk)
    code, _, err = run(capsys, "--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3")
    assert code == 1 and one_error_line(err) and "disk is full" in err, err


@pytest.mark.parametrize(
    ("dialogue", "names"),
    [
        ({"id": "c", "sessions": [{"date_time": "1:00 pm on 1 May, 2023", "turns": []}]},
         "sessions[0].turns: the only session has no turns"),
        ({"id": "c", "sessions": [{"turns": []}, {"turns": []}]}, "all 2 sessions"),
        ([{"id": "a", "sessions": [{"turns": [{"speaker": "A", "text": "hi"}]}]}, {"id": "b", "sessions": [{"turns": []}]}],
         "[1].sessions[0].turns"),
    ],
    ids=["only-session", "every-session", "second-conversation"],
)
def test_dialogue_without_any_turn(
    capsys: pytest.CaptureFixture[str], ingested: Path, tmp_path: Path, dialogue: object, names: str
) -> None:
    path = tmp_path / "no-turns.json"
    path.write_text(json.dumps(dialogue))
    before = open_workspace(ingested).docs.namespaces()
    code, out, err = run(capsys, "--data-dir", str(ingested), "ingest", str(path), "-n", "empty",
                         "--conversation", "b" if isinstance(dialogue, list) else "c")
    assert code == 2 and out == "" and one_error_line(err), err
    assert "no-turns.json" in err and names in err and "no turns" in err
    assert open_workspace(ingested).docs.namespaces() == before


def test_an_empty_session_among_others_is_still_accepted(
    capsys: pytest.CaptureFixture[str], data_dir: str, tmp_path: Path
) -> None:
    path = tmp_path / "gap.json"
    path.write_text(json.dumps({"id": "c", "sessions": [{"turns": []}, {"turns": [{"speaker": "A", "text": "hi"}]}]}))
    code, _, _ = run(capsys, "--data-dir", data_dir, "ingest", str(path), "-n", "gap", "--methods", "memr3")
    assert code == 0 and open_workspace(data_dir).namespace_info("gap").sessions == [1, 2]


@pytest.mark.parametrize("methods", [",", " , ", ""])
def test_methods_naming_no_method(
    capsys: pytest.CaptureFixture[str], data_dir: str, sample_path: Path, methods: str
) -> None:
    code, out, err = run(capsys, "--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", methods)
    assert code == 2 and out == "" and one_error_line(err) and "names no method" in err, err
    assert open_workspace(data_dir).docs.namespaces() == []


@pytest.mark.parametrize("namespace", ["", " lead", "line\nbreak", "x" * 201])
def test_bad_namespace_fails_before_reading_or_printing(
    capsys: pytest.CaptureFixture[str], ingested: Path, sample_path: Path, namespace: str
) -> None:
    before = fingerprint(ingested)
    for argv in (["ingest", str(sample_path), "-n", namespace, "--methods", "memr3"], ["ask", "hi?", "-n", namespace],
                 ["forget", namespace]):
        code, out, err = run(capsys, "--data-dir", str(ingested), *argv)
        assert code == 2 and out == "" and one_error_line(err) and "invalid namespace" in err, (argv, err)
    assert fingerprint(ingested) == before


SURROGATE_TEXT = '{"id": "c", "sessions": [{"turns": [{"speaker": "A", "text": "bad \\ud800 text"}]}]}'
UNREADABLE = [
    (SURROGATE_TEXT, r"sessions\[0\]\.turns\[0\]\.text: holds a lone UTF-16 surrogate \(U\+D800 at character 4\)"),
    ('{"id": "c", "sessions": [{"turns": [{"speaker": "\\udc00", "text": "hi"}]}]}',
     r"sessions\[0\]\.turns\[0\]\.speaker: holds a lone UTF-16 surrogate \(U\+DC00"),
    ('[{"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": '
     '[{"speaker": "A", "dia_id": "D1:1", "text": "x \\udfff"}]}}]',
     r"\[0\]\.conversation\.session_1\[0\]\.text: holds a lone"),
    ('{"id": "c", "sessions": [{"turns": [{"speaker": "A", "text": "hi", "\\ud800": 1}]}]}',
     r"sessions\[0\]\.turns\[0\]: a key holds a lone"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
    ('{"a": ' * 50_000 + "1" + "}" * 50_000, "nested more than 64 levels deep"),
    ('{"sessions": [{"turns": [{"speaker": "A", "text": ' + "[" * 60_000 + "]" * 60_000 + "}]}]}",
     "nested more than 64 levels deep"),
]


@pytest.mark.parametrize(("content", "names"), UNREADABLE,
                         ids=["surrogate-text", "surrogate-speaker", "surrogate-locomo", "surrogate-key",
                              "deep-list", "deep-object", "deep-turn-text"])
def test_unstorable_or_too_deep_dialogue_is_one_error_and_leaves_nothing(
    capsys: pytest.CaptureFixture[str], ingested: Path, tmp_path: Path, content: str, names: str
) -> None:
    """A lone surrogate ended in a TypeError from the store after the vector collection was made, and deep
    nesting in a RecursionError in the loader (issue 37): one error naming file, record and field, exit 2."""
    path = tmp_path / "bad.json"
    path.write_text(content)
    before = fingerprint(ingested)
    fresh = tmp_path / "fresh-data"
    for data_dir in (ingested, fresh):
        code, out, err = run(capsys, "--data-dir", str(data_dir), "ingest", str(path), "-n", "bad", "--methods", "memr3")
        assert code == 2 and out == "" and one_error_line(err), err
        assert err.startswith(f"error: {path}: ") and re.search(names, err), err
    assert fingerprint(ingested) == before  # no collection, no registry entry
    assert not fresh.exists()


def test_a_conversation_built_in_python_is_checked_before_anything_is_stored(data_dir: str) -> None:
    from recollect.dialogue.models import Conversation, DialogueError, Session, Turn
    from recollect.ingestion import ingest_conversation

    turn = Turn(id="D1:1", speaker="A", text="bad \ud800", session=1, index=1)
    conversation = Conversation(id="c", speakers=("A",), sessions=(Session(1, "", None, (turn,)),))
    with pytest.raises(DialogueError, match=r"conversation 'c': sessions\[0\]\.turns\[0\]\.text: holds a lone"):
        ingest_conversation(conversation, "py", methods=["memr3"], ws=open_workspace(data_dir))
    ws = open_workspace(data_dir)
    assert ws.docs.namespaces() == [] and ws.client.list_collections() == []
