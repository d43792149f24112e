"""Step traces: every node emits records through the custom stream and stores them in `trace`.

A record is a flat JSON dict with at least `node`; records that put memory text in front of the
LLM carry `shown_turn_ids`, the turn ids behind that text, which evaluation unions into the
retrieved set. `format_step` turns a record into the one line `recollect ask --trace` prints.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.config import get_stream_writer


def emit(node: str, **fields: Any) -> list[dict[str, Any]]:
    """Send a step record to the custom stream (when streaming) and return it for `trace`."""
    record = {"node": node, "t": round(time.time(), 3), **fields}
    try:
        writer = get_stream_writer()
    except Exception:  # called outside a graph run (unit tests of helpers)
        writer = None
    if writer is not None:
        writer({"trace": record})
    return [record]


def shown_turn_ids(trace: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for rec in trace:
        for tid in rec.get("shown_turn_ids") or ():
            seen.setdefault(tid, None)
    return list(seen)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SKIP = {"node", "t", "shown_turn_ids"}


def format_step(record: dict[str, Any]) -> str:
    node = record.get("node", "?")
    parts = []
    for key, value in record.items():
        if key in _SKIP or value in (None, "", [], {}):
            continue
        if isinstance(value, list) and value and isinstance(value[0], str):
            shown = ", ".join(value[:8]) + (f" …(+{len(value) - 8})" if len(value) > 8 else "")
            parts.append(f"{key}=[{_short(shown, 200)}]")
        elif isinstance(value, list | dict):
            parts.append(f"{key}={_short(value)}")
        else:
            parts.append(f"{key}={_short(value)}")
    return f"[{node}] " + "  ".join(parts)
