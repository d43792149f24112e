"""benchmarks/llm_tape.py: a recorded run replays with no model, and a changed request is counted as a miss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.service.scripted_endpoint import ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[2]


def _tape(tmp: Path, mode: str, tape: Path, env: dict[str, str], question: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "llm_tape.py"), mode, str(tape), "--",
           "--data-dir", str(tmp / "d"), "ask", question, "-n", "demo", "-m", "rag", "--json"]
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def test_record_then_replay_without_the_model(tmp_path: Path) -> None:
    env = dict(os.environ, RECOLLECT_EMBEDDER="hash")
    subprocess.run([sys.executable, "-m", "recollect.cli", "--data-dir", str(tmp_path / "d"), "ingest", "sample",
                    "-n", "demo", "--methods", "memr3"], env=env, check=True, capture_output=True)
    tape = tmp_path / "tape.jsonl"
    with ScriptedEndpoint() as url:
        rec = _tape(tmp_path, "record", tape, {**env, "RECOLLECT_LLM_BASE_URL": url, "RECOLLECT_LLM_MODEL": "scripted"},
                    "What is the name of Maya's dog?")
    assert rec.returncode == 0, rec.stderr[-2000:]
    assert "1 recorded" in rec.stderr and json.loads(tape.read_text().splitlines()[0])["status"] == 200
    # The endpoint is gone: the replay answers from the tape alone.
    dead = {**env, "RECOLLECT_LLM_BASE_URL": "http://127.0.0.1:9/v1", "RECOLLECT_LLM_MODEL": "scripted",
            "RECOLLECT_LLM_MAX_RETRIES": "0"}
    again = _tape(tmp_path, "replay", tape, dead, "What is the name of Maya's dog?")
    assert again.returncode == 0 and "1 replayed, 0 missed" in again.stderr, again.stderr[-2000:]
    assert json.loads(again.stdout)["answer"] == json.loads(rec.stdout)["answer"]
    other = _tape(tmp_path, "replay", tape, dead, "Where does Maya work?")
    assert other.returncode != 0 and "1 missed" in other.stderr
    assert (tmp_path / "tape.misses.jsonl").is_file()
