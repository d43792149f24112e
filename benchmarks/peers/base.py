"""What a peer is to the runner: ingest one session, search a namespace; plus the provenance the runner keeps.

A peer wraps one memory library behind two calls made through that library's own public API:
`ingest_session` (the library decides what to store) and `search` (the library decides what comes back).
Neither library keeps the source turn of a memory (both are fed a whole session at a time), so the
runner keeps each memory's provenance itself: the sessions whose ingestion created or changed it
(`Provenance`). That gives session recall; turn-level evidence recall is not available (null).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from recollect.dialogue.models import Session


@dataclass(frozen=True)
class Found:
    """One search result: the library's memory id and text, best first."""

    id: str
    text: str
    score: float | None = None


@dataclass
class Stored:
    """What one session's ingestion did, from the library's own report."""

    events: list[tuple[str, str]] = field(default_factory=list)  # (memory id, ADD | UPDATE | DELETE)
    errors: list[str] = field(default_factory=list)  # failures the library logged instead of raising


class Peer(Protocol):
    name: str

    def ingest_session(self, namespace: str, session: Session) -> Stored: ...

    def search(self, namespace: str, query: str, k: int) -> list[Found]: ...

    def count(self, namespace: str) -> int: ...

    def close(self) -> None: ...


def session_messages(session: Session) -> list[dict[str, str]]:
    """A session as chat messages: a first line with its date, then one `Speaker: text` per turn.

    Both speakers are people, not a user and an assistant, so every turn is a `user` message that names
    its speaker (mem0's extraction reads user messages; LangMem merges the run into one transcript).
    The date line gives the libraries the session date our own methods see on every turn.
    """
    head = {"role": "user", "content": f"(Conversation of {session.date_time})"} if session.date_time else None
    turns = [{"role": "user", "content": f"{t.speaker}: {t.full_text}"} for t in session.turns]
    return ([head] if head else []) + turns


class Provenance:
    """memory id -> {"sessions": [...], "date_time": the latest such session's date}, saved as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: dict[str, dict[str, Any]] = (
            json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {})

    def apply(self, session: Session, events: Iterable[tuple[str, str]]) -> None:
        for mem_id, event in events:
            if event == "DELETE":
                self.items.pop(mem_id, None)
                continue
            entry = self.items.setdefault(mem_id, {"sessions": [], "date_time": ""})
            if session.index not in entry["sessions"]:
                entry["sessions"].append(session.index)
            entry["date_time"] = session.date_time

    def sessions(self, mem_id: str) -> list[int]:
        return list(self.items.get(mem_id, {}).get("sessions", []))

    def date_time(self, mem_id: str) -> str:
        return str(self.items.get(mem_id, {}).get("date_time", ""))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.items, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
