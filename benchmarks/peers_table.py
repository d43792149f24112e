"""recollect vs mem0 vs LangMem on the same model and slice: committed text-free rows and the README table.

    python benchmarks/peers_table.py --run runs/peers_slice --rows benchmarks/reports/peers_slice/rows \
        --report benchmarks/reports/peers_slice

1. The peers' rows of the run folder (`python -m benchmarks.peers --out <run>` appended them to its
   `per_question.jsonl`) become ledger rows (`recollect.eval.ledger`: ids and numbers only) under
   `<rows>/<peer>.jsonl`, fingerprinted by the library's version and configuration (`peer:<version>:<settings_id>`),
   and each peer's ingestion of a session becomes a line of `<rows>/builds.jsonl`.
2. The table: per graph (rows of its current fingerprint only) and per peer, LoCoMo-F1 with its 95 %
   bootstrap interval, the paired difference from rag, seconds per question and ingestion seconds per
   session, written to `<report>/README.md` and `summary.json`.

The graphs' rows come from `recollect eval --rows <rows>` on the same selection (benchmarks/peers_slice.sh).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from recollect.eval.estimate import read_builds  # noqa: E402
from recollect.eval.fingerprint import graph_fingerprint  # noqa: E402
from recollect.eval.intervals import bootstrap_mean, paired_difference  # noqa: E402
from recollect.eval.ledger import (  # noqa: E402
    BUILDS_NAME,
    append_ledger,
    ledger_row,
    one_per_question,
    read_ledger,
)
from recollect.graphs.registry import METHODS, AllMethodsContext  # noqa: E402

PEERS = ("mem0", "langmem")


def _peer_versions(run: Path) -> dict[str, str]:
    cfg = run / "peers_config.json"
    data = json.loads(cfg.read_text(encoding="utf-8")) if cfg.is_file() else {}
    return {p: str((data.get(p) or {}).get("library_version") or (data.get(p) or {}).get("version") or "unknown")
            for p in PEERS}


def import_peers(run: Path, rows_dir: Path) -> int:
    """Peer rows and ingestion logs of the run folder into the committed rows; returns the rows added."""
    have = {(r["method"], r["question_id"], r["fingerprint"]) for r in read_ledger(rows_dir, PEERS)}
    versions = _peer_versions(run)
    added = 0
    path = run / "per_question.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        row = json.loads(line)
        if row.get("method") not in PEERS or row.get("error"):
            continue
        fp = f"peer:{versions[row['method']]}:{row.get('settings_id')}"
        if (row["method"], row["question_id"], fp) in have:
            continue
        # the slice asks categories 1-4 only, whose question is asked as written
        append_ledger(rows_dir, ledger_row(row, row["question"], fp, {"runtime": "as the graphs' rows of this run"}))
        added += 1
    builds = {(b.get("builder"), b.get("sample_id"), b.get("session")) for b in read_builds(rows_dir)}
    with (rows_dir / BUILDS_NAME).open("a", encoding="utf-8") as fh:
        for peer in PEERS:
            for log in sorted((run / "peers" / peer).glob("*.sessions.jsonl")):
                for rec in map(json.loads, log.read_text(encoding="utf-8").splitlines()):
                    key = (peer, rec["namespace"], rec["session"])
                    if key in builds:
                        continue
                    fh.write(json.dumps({"builder": peer, "sample_id": rec["namespace"], "session": rec["session"],
                                         "sessions": 1, "seconds": rec["seconds"], "llm_calls": rec["llm_calls"],
                                         "stored_after": rec["stored_after"], "fingerprint": f"peer:{versions[peer]}"},
                                        sort_keys=True) + "\n")
    return added


def _ingest_seconds_per_session(builder: str, builds: Sequence[dict[str, Any]]) -> float | None:
    # a build replayed from the tape (a carry-over's memory) took seconds of embedding, not of the model
    mine = [b for b in builds if b.get("builder") == builder and b.get("sessions")
            and not (b.get("replayed_requests") and not b.get("recorded_requests"))]
    sessions = sum(int(b["sessions"]) for b in mine)
    return sum(float(b["seconds"]) for b in mine) / sessions if sessions else None


def table(rows_dir: Path, graphs: Sequence[str]) -> dict[str, Any]:
    """Per system: F1 with interval, paired difference from rag, seconds per question, ingestion per session."""
    ctx = AllMethodsContext()
    ledger = read_ledger(rows_dir)
    fingerprints = {m: graph_fingerprint(m, ctx) for m in graphs}
    chosen = one_per_question([r for r in ledger if r["method"] in fingerprints
                               and r["fingerprint"] in fingerprints[r["method"]].accepted]) + [
        r for r in ledger if r["method"] in PEERS]
    rag_ids = {r["question_id"] for r in chosen if r["method"] == "rag"}
    builds = read_builds(rows_dir)
    out: dict[str, Any] = {}
    for system in [*graphs, *PEERS]:
        mine = [r for r in chosen if r["method"] == system and r["question_id"] in rag_ids]
        if not mine:
            continue
        builder = "turns" if system == "full_context" else METHODS[system].memory_name if system in METHODS else system
        out[system] = {
            "questions": len(mine),
            "f1": bootstrap_mean([float(r["locomo_f1"] or 0.0) for r in mine]),
            "vs_rag": None if system == "rag" else paired_difference(
                [r for r in chosen if r["question_id"] in rag_ids], system, "rag", (1, 2, 3, 4)),
            "seconds_per_question": sum(float(r["wall_time_s"]) for r in mine) / len(mine),
            "evidence_shown": _mean_of(mine, "evidence_shown"),
            "evidence_shown_vs_rag": _shown_vs_rag(mine, [r for r in chosen if r["method"] == "rag"]),
            "prefill_tokens_computed": _mean_of(mine, "prompt_tokens_computed"),
            "ingest_seconds_per_session": _ingest_seconds_per_session(builder or "turns", builds),
            "fingerprint": fingerprints[system].digest if system in fingerprints else mine[0]["fingerprint"],
        }
    return out


def _mean_of(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """The mean of a numeric field over the rows that have it (a question with no gold turn has no funnel)."""
    vals = [float(r[key]) for r in rows if isinstance(r.get(key), int | float)]
    return sum(vals) / len(vals) if vals else None


def _shown_vs_rag(mine: Sequence[dict[str, Any]], rag: Sequence[dict[str, Any]]) -> float | None:
    """Mean difference of evidence shown from rag's on the same questions (those with gold turns)."""
    by_q = {r["question_id"]: r for r in rag}
    diffs = [float(r["evidence_shown"]) - float(by_q[r["question_id"]]["evidence_shown"]) for r in mine
             if isinstance(r.get("evidence_shown"), int | float) and r["question_id"] in by_q
             and isinstance(by_q[r["question_id"]].get("evidence_shown"), int | float)]
    return sum(diffs) / len(diffs) if diffs else None


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def markdown(t: dict[str, Any], title: str) -> list[str]:
    lines = [f"### {title}", "",
             "| system | questions | LoCoMo-F1 [95 % CI] | paired Δ vs rag [95 % CI] | evidence shown % "
             "| shown Δ vs rag (same questions) | s per question | computed prompt tokens per question "
             "| ingestion s per session |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in t.items():
        f1, d = s["f1"], s["vs_rag"]
        ing = s["ingest_seconds_per_session"]
        lines.append(f"| {name} | {s['questions']} | {_pct(f1['mean'])} [{_pct(f1['lo'])}, {_pct(f1['hi'])}] | "
                     + ("–" if d is None else f"{100 * d['mean']:+.1f} [{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]")
                     + f" | {_pct(s.get('evidence_shown'))} | "
                     + ("–" if s.get("evidence_shown_vs_rag") is None or name == "rag"
                        else f"{100 * s['evidence_shown_vs_rag']:+.1f}")
                     + f" | {s['seconds_per_question']:.1f} | "
                     + ("–" if s.get("prefill_tokens_computed") is None else f"{s['prefill_tokens_computed']:.0f}")
                     + f" | {'–' if ing is None else f'{ing:.1f}'} |")
    return lines + [""]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="the run folder holding the peers' rows (omit to only make the table)")
    ap.add_argument("--rows", type=Path, required=True)
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--title", default="recollect vs mem0 vs LangMem on the same model (a slice)")
    args = ap.parse_args(argv)
    if args.run is not None:
        print(f"{import_peers(args.run, args.rows)} peer rows added to {args.rows}")
    t = table(args.rows, [m for m in METHODS])
    args.report.mkdir(parents=True, exist_ok=True)
    (args.report / "summary.json").write_text(json.dumps(t, indent=2) + "\n", encoding="utf-8")
    md = markdown(t, args.title)
    (args.report / "table.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
