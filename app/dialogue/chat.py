"""A running chat's messages as dialogue turns: who said what, when, under which stable key.

`chat_turns` reads LangChain messages (`HumanMessage`, `AIMessage`, ...), role dicts
(`{"role": "user", "content": ..., "name": ..., "timestamp": ..., "id": ...}`) or `(role, content)` pairs.
Only what people said becomes a turn: human and AI messages with text. System and tool messages, and an AI
message that only calls tools, are left out.

- **Speaker**: the message's `name`, else `user_name` for the human side and `assistant_name` for the AI.
- **Time**: a `timestamp` (datetime, ISO 8601 text or Unix seconds) in the dict, the message's
  `additional_kwargs` or `response_metadata`; else `now`. A time with a zone is read in this machine's
  local zone; turns keep wall-clock time, as dialogue files do.
- **Key** (what makes remembering idempotent): `id:<message id>` when the message has an id (LangGraph
  gives every message in a thread's state one), else a digest of the thread, the message's position in the
  list, its role, speaker, text and given timestamp. Sending the same messages twice gives the same keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recollect.dialogue.loaders import MONTHS
from recollect.dialogue.models import DialogueError

_HUMAN = frozenset({"human", "user"})
_AI = frozenset({"ai", "assistant"})


@dataclass(frozen=True)
class ChatTurn:
    key: str
    speaker: str
    text: str
    at: datetime  # naive wall-clock time
    side: str  # "human" or "ai"


def _parse_time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        parsed = datetime.fromtimestamp(float(value)).astimezone()
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise DialogueError(f"timestamp {value[:40]!r} is not ISO 8601 (2024-05-08T13:56:00)") from None
    else:
        raise DialogueError(f"timestamp must be a datetime, ISO 8601 text or Unix seconds, got {type(value).__name__}")
    return parsed.astimezone().replace(tzinfo=None) if parsed.tzinfo is not None else parsed


def _fields(message: Any) -> tuple[str, str, str | None, str | None, Any]:
    """(role, text, name, id, given timestamp) of one message in any accepted form."""
    if isinstance(message, tuple | list) and len(message) == 2:
        message = {"role": message[0], "content": message[1]}
    if isinstance(message, str):
        message = {"role": "human", "content": message}
    if isinstance(message, Mapping):
        role = str(message.get("role") or message.get("type") or "")
        content = message.get("content")
        extra = {**(message.get("additional_kwargs") or {}), **(message.get("response_metadata") or {})}
        stamp = message.get("timestamp", extra.get("timestamp"))
        name, mid = message.get("name"), message.get("id")
    else:
        role = str(getattr(message, "type", "") or "")
        if role == "chat":
            role = str(getattr(message, "role", "") or "")
        content = getattr(message, "content", "")
        extra = {**(getattr(message, "additional_kwargs", None) or {}), **(getattr(message, "response_metadata", None) or {})}
        stamp = extra.get("timestamp")
        name, mid = getattr(message, "name", None), getattr(message, "id", None)
    if isinstance(content, list):  # content blocks: the text parts
        content = " ".join(p.get("text", "") if isinstance(p, Mapping) else str(p) for p in content
                           if not isinstance(p, Mapping) or p.get("type", "text") == "text")
    text = " ".join(str(content or "").split())  # an AI message that only calls tools has none: nothing to remember
    return role.lower(), text, (str(name) if name else None), (str(mid) if mid else None), stamp


def chat_turns(messages: Iterable[Any], *, thread: str, user_name: str = "User", assistant_name: str = "Assistant",
               now: datetime | None = None) -> list[ChatTurn]:
    """The turns `messages` hold, in order, each with its stable key (see the module docstring)."""
    now = now or datetime.now()
    out: list[ChatTurn] = []
    for position, message in enumerate(messages):
        role, text, name, mid, stamp = _fields(message)
        if not text or (role not in _HUMAN and role not in _AI):
            continue
        side = "human" if role in _HUMAN else "ai"
        speaker = name or (user_name if side == "human" else assistant_name)
        given = _parse_time(stamp)
        if mid:
            key = f"id:{mid}"
        else:
            payload = [thread, position, side, speaker, text, given.isoformat() if given else None]
            key = "sha:" + hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()[:32]
        out.append(ChatTurn(key=key, speaker=speaker, text=text, at=given or now, side=side))
    return out


def locomo_time(at: datetime) -> str:
    """`at` in LoCoMo's date-time form (`1:56 pm on 8 May, 2023`), which every date rule of the methods reads."""
    hour = at.hour % 12 or 12
    return f"{hour}:{at.minute:02d} {'am' if at.hour < 12 else 'pm'} on {at.day} {MONTHS[at.month - 1]}, {at.year}"
