"""The dialogue model every loader produces: Conversation → Session → Turn."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Turn:
    id: str  # LoCoMo dia_id, e.g. "D3:12"
    speaker: str
    text: str
    session: int
    index: int  # 1-based position inside the session
    date_time: str = ""  # the session's raw date-time string
    caption: str | None = None
    img_urls: tuple[str, ...] = ()

    @property
    def full_text(self) -> str:
        """Text with an image caption appended in the project's fixed form."""
        if self.caption:
            return f"{self.text} [shared image: {self.caption}]".strip()
        return self.text

    def render(self, with_date: bool = True) -> str:
        """One line for prompts: `[D1:3] 8 May, 2023 1:56 pm | Caroline: text`."""
        if with_date and self.date_time:
            return f"[{self.id}] {self.date_time} | {self.speaker}: {self.full_text}"
        return f"[{self.id}] {self.speaker}: {self.full_text}"


@dataclass(frozen=True)
class Session:
    index: int
    date_time: str
    parsed: datetime | None
    turns: tuple[Turn, ...]

    @property
    def id(self) -> str:
        return f"S{self.index}"

    @property
    def date(self) -> str:
        """Day-precision date for prompts (`8 May 2023`), or the raw string when unparsed."""
        if self.parsed is None:
            return self.date_time
        return f"{self.parsed.day} {self.parsed:%B %Y}"

    def content_hash(self) -> str:
        payload = [self.date_time, [(t.id, t.speaker, t.full_text) for t in self.turns]]
        return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class Conversation:
    id: str
    speakers: tuple[str, ...]
    sessions: tuple[Session, ...]
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]

    def turn_map(self) -> dict[str, Turn]:
        return {t.id: t for t in self.turns}

    def session(self, index: int) -> Session:
        for s in self.sessions:
            if s.index == index:
                return s
        raise KeyError(f"conversation {self.id} has no session {index}")

    def content_hash(self) -> str:
        return hashlib.sha256("".join(s.content_hash() for s in self.sessions).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "speakers": list(self.speakers),
            "sessions": [
                {
                    "index": s.index,
                    "date_time": s.date_time,
                    "turns": [asdict(t) | {"img_urls": list(t.img_urls)} for t in s.turns],
                }
                for s in self.sessions
            ],
        }


class DialogueError(ValueError):
    """A dialogue file is missing or malformed. The message names file, record and field."""
