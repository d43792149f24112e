"""benchmarks/peers_table.py: the peers' rows become text-free committed rows, and the table reads only those."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.peers_table import import_peers, markdown, table
from recollect.eval.fingerprint import graph_fingerprint
from recollect.eval.ledger import append_ledger, check_text_free, ledger_row, read_ledger
from recollect.graphs.registry import AllMethodsContext


def _row(method: str, qid: str, f1: float, wall: float) -> dict[str, Any]:
    return {"method": method, "question_id": qid, "sample_id": "conv-x", "category": 1, "category_name": "multi-hop",
            "question": f"What did Ann say about the trip number {qid}?", "prediction": "a secret answer text",
            "locomo_f1": f1, "locomo_f1_r3": round(f1, 3), "wall_time_s": wall, "settings_id": "abc123",
            "prompt_tokens": 100, "completion_tokens": 5, "error": None}


def test_peer_rows_are_imported_without_text_and_tabled(tmp_path: Path) -> None:
    run, rows = tmp_path / "run", tmp_path / "rows"
    (run / "peers" / "mem0").mkdir(parents=True)
    (run / "peers_config.json").write_text(json.dumps({"mem0": {"library_version": "1.0.6"}}))
    lines = [_row("mem0", f"conv-x#{i}", 0.25, 2.0) for i in range(3)]
    (run / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run / "peers" / "mem0" / "locomo-conv-x-s5.sessions.jsonl").write_text("".join(
        json.dumps({"namespace": "locomo-conv-x-s5", "session": s, "seconds": 30.0, "llm_calls": 3, "stored_after": s})
        + "\n" for s in (1, 2)))
    rag_fp = graph_fingerprint("rag", AllMethodsContext()).digest
    for i in range(3):
        r = _row("rag", f"conv-x#{i}", 0.5, 4.0)
        append_ledger(rows, ledger_row(r, r["question"], rag_fp, {"runtime": "endpoint"}))
    append_ledger(rows, ledger_row(_row("rag", "conv-x#0", 0.0, 9.0), "q", "0" * 64, {}))  # a stale fingerprint

    assert import_peers(run, rows) == 3
    assert import_peers(run, rows) == 0  # idempotent
    peer_rows = read_ledger(rows, ["mem0"])
    for r in peer_rows:
        check_text_free(r)
    assert "secret" not in (rows / "mem0.jsonl").read_text()
    t = table(rows, ["rag"])
    assert t["rag"]["questions"] == 3 and abs(t["rag"]["f1"]["mean"] - 0.5) < 1e-9  # stale row left out
    assert abs(t["mem0"]["vs_rag"]["mean"] + 0.25) < 1e-9
    assert t["mem0"]["ingest_seconds_per_session"] == 30.0
    assert "| mem0 | 3 | 25.0" in "\n".join(markdown(t, "slice"))
