"""Model-time estimates for `recollect eval --plan` and `--time-budget`, from earlier rows and build logs.

A question's cost is the larger of two means over the graph's newest ledger rows (any fingerprint: the
newest code costs most like the code now): their `wall_time_s`, and the seconds their tokens take this runtime
(prompt tokens the server computed and completion tokens, at the 2-core AVX-512 runtime's measured rates). A
row whose replies came from the tape took seconds but recorded the taped tokens, so the second mean keeps a
replayed run from passing for a cheap graph. Without rows, the figure measured on a whole held-out
conversation (issue "MemR3 and MRAgent at most twice RAG's time": 2 CPU cores with AVX-512). A memory build's cost is
the seconds per session of the builder's earlier builds (`builds.jsonl` beside the rows), else a default
from the same measurements. A carry-over replays a question with no model: retrieval only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recollect.eval.ledger import BUILDS_NAME

# Seconds per question on a whole 25-session conversation, 2 cores, AVX-512 runtime (issue 34's table and
# the decisive eval's earlier rows); used until this machine has rows of its own.
DEFAULT_SECONDS = {"rag": 10.0, "full_context": 8.0, "hymem": 16.0, "mgretrieval": 25.0, "memr3": 37.0,
                   "mragent": 76.0}
# Seconds per session of memory construction (turns and chunks: embedding only; the others call the model).
DEFAULT_BUILD_SECONDS = {"turns": 1.0, "memr3": 2.0, "hymem": 21.0, "mgretrieval": 21.0, "mragent": 77.0}
REPLAY_SECONDS = 3.0  # a carried-over question: retrieval and embedding, every reply from the tape
# The 2-core AVX-512 runtime's prefill and decode rates (benchmarks/reports/speed/builders.md: 62 and 11.7 tokens/s
# in that run; other runs 57-72 and 11-13).
PREFILL_TOKENS_PER_S = 60.0
DECODE_TOKENS_PER_S = 11.0
RECENT_ROWS = 40  # the graph's newest rows that estimate its cost


def parse_duration(text: str) -> float:
    """'140m', '2h', '1h30m', '90s', '45' (minutes) -> seconds; ValueError naming the value otherwise."""
    s = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s) * 60
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", s)
    if not parts or re.sub(r"\d+(?:\.\d+)?\s*[hms]", "", s).strip():
        raise ValueError(f"--time-budget: {text!r} is not a duration (e.g. 140m, 2h, 1h30m, 90s)")
    seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[unit] for n, unit in parts)
    if seconds <= 0:
        raise ValueError(f"--time-budget: {text!r} must be more than zero")
    return seconds


def token_seconds(row: dict[str, Any]) -> float:
    """The seconds a row's model calls take at the runtime's rates, from the tokens it recorded."""
    computed = float(row.get("prompt_tokens_computed") or row.get("prompt_tokens") or 0.0)
    return computed / PREFILL_TOKENS_PER_S + float(row.get("completion_tokens") or 0.0) / DECODE_TOKENS_PER_S


def seconds_per_question(method: str, rows: Iterable[dict[str, Any]]) -> float:
    """The larger of the graph's earlier rows' mean measured seconds and mean token seconds (see the module's
    docstring); the default figure without rows."""
    mine = [r for r in rows if r.get("method") == method and r.get("wall_time_s") and not r.get("error")]
    mine = mine[-RECENT_ROWS:]  # the newest rows (rows are appended): the graph as it is now costs most like them
    if not mine:
        return DEFAULT_SECONDS.get(method, 30.0)
    walls = sum(float(r["wall_time_s"]) for r in mine) / len(mine)
    return max(walls, sum(token_seconds(r) for r in mine) / len(mine))


def read_builds(rows_dir: Path | None) -> list[dict[str, Any]]:
    path = Path(rows_dir) / BUILDS_NAME if rows_dir is not None else None
    if path is None or not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def build_seconds_per_session(builder: str, builds: Sequence[dict[str, Any]]) -> float:
    """Seconds per session of the builder's earlier builds that asked the model (not replays)."""
    mine = [b for b in builds if b.get("builder") == builder and not b.get("replayed_requests")
            and b.get("sessions")]
    sessions = sum(int(b["sessions"]) for b in mine)
    if not sessions:
        return DEFAULT_BUILD_SECONDS.get(builder, 30.0)
    return sum(float(b["seconds"]) for b in mine) / sessions


def format_minutes(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"
