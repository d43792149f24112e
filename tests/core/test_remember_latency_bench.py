"""benchmarks/remember_latency.py with the scripted model (a plumbing check; the report's numbers come from the
embedded model): both agents answer every message, the one with remember through its node and the other by an
untimed remember() after each run (so both recall the same memories), and the report holds the command and the
verdict."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import remember_latency
from recollect.memory.workspace import open_workspace


def test_the_benchmark_measures_both_agents_on_the_same_messages(tmp_path: Path) -> None:
    out, data = tmp_path / "report", tmp_path / "data"
    assert remember_latency.main(["--questions", "3", "--model", "scripted", "--out", str(out),
                                  "--data-dir", str(data)]) == 0
    result = json.loads((out / "remember_latency.json").read_text())
    assert result["questions"] == 3 and len(result["rows"]) == 3 and result["model"] == "scripted"
    assert [r["message"] for r in result["rows"]] == remember_latency.messages(4)[1:]
    assert all(r["with_remember_ms"] > 0 and r["without_remember_ms"] == 0 for r in result["rows"])
    assert set(result["added_ms"]) == {"mean", "p50", "p90", "max"} and isinstance(result["goal_met"], bool)
    assert result["background_builds_finished"] is True
    md = (out / "remember_latency.md").read_text()
    assert "python benchmarks/remember_latency.py --questions 3 --model scripted" in md and "| remember node |" in md
    # the agent with remember kept all 4 messages and its replies; the one without got the same turns stored
    # after its runs, untimed, so both recalled the same memories
    with_turns = open_workspace(str(data / "with")).turns("bench")
    without_turns = open_workspace(str(data / "without")).turns("bench")
    assert len(with_turns) == 8 and list(with_turns) == list(without_turns)
