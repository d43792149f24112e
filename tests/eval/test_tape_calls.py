"""benchmarks/tape_calls.py: a tape's calls grouped by kind, numbers only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import tape_calls


def _entry(request: dict, timings: dict | None, usage: dict, status: int = 200) -> str:
    reply = {"choices": [{"message": {"content": "private words"}}], "usage": usage, **({"timings": timings} if timings else {})}
    return json.dumps({"key": "k", "path": "/chat/completions", "status": status, "content_type": "application/json",
                       "request": json.dumps(request), "reply": json.dumps(reply)})


def test_calls_are_grouped_by_kind_and_messages_and_hold_no_text(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    router = {"messages": [{"content": "private words"}] * 2, "response_format": {"schema": {"title": "Router"}}}
    cont = {"messages": [{"content": "private words"}] * 4, "response_format": {"schema": {"title": "Answer"}}}
    tools = {"messages": [{"content": "x"}], "tools": [{}]}
    tape = tmp_path / "t.jsonl"
    tape.write_text("\n".join([
        _entry(router, {"prompt_n": 1000, "cache_n": 200, "prompt_ms": 6000, "predicted_ms": 3000}, {"completion_tokens": 100}),
        _entry(router, {"prompt_n": 500, "cache_n": 400, "prompt_ms": 3000, "predicted_ms": 1000}, {"completion_tokens": 50}),
        _entry(cont, None, {"prompt_tokens": 900, "completion_tokens": 20,
                            "prompt_tokens_details": {"cached_tokens": 800}}),  # a server without timings
        _entry(tools, {"prompt_n": 10, "cache_n": 0, "prompt_ms": 100, "predicted_ms": 100}, {"completion_tokens": 1}),
        _entry(router, {"prompt_n": 1}, {}, status=599),  # a replay miss: not a call the model made
    ]) + "\n")
    out = tmp_path / "calls"
    assert tape_calls.main([str(tape), "--out", str(out)]) == 0
    saved = json.loads(out.with_suffix(".json").read_text())
    kinds = {(k["kind"], k["messages"]): k for k in saved["kinds"]}
    assert kinds["Router", 2] == {"kind": "Router", "messages": 2, "calls": 2, "computed": 750.0, "cached": 300.0,
                                  "completion": 75.0, "prefill_s": 4.5, "decode_s": 2.0}
    assert kinds["Answer", 4]["computed"] == 100.0 and kinds["Answer", 4]["cached"] == 800.0
    assert kinds["tools", 1]["calls"] == 1 and saved["calls"] == 4 and saved["model_seconds"] == 13.2
    assert "private" not in out.with_suffix(".md").read_text() + out.with_suffix(".json").read_text()
    assert "| Router | 2 | 2 | 750 | 300 | 75 | 4.5 | 2 |" in capsys.readouterr().out
