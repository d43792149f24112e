"""MRAgent's ingestion windows: a session cut into runs of turns whose prompt text fits
`mra_ingest_window_tokens` (the whole session when it fits; README.md in this folder)."""

from __future__ import annotations

from datetime import datetime

from recollect.budget import pack_batches
from recollect.dialogue.models import Session, Turn
from recollect.llm.usage import estimate_tokens


def render_turn_line(turn: Turn) -> str:
    """A turn as the json rewrite prompt shows it (and as every format measures it for the windows)."""
    return f"{turn.id} | {turn.speaker}: {turn.full_text}"


def windows(session: Session, max_tokens: int) -> list[list[Turn]]:
    """Consecutive turn windows whose rendered text fits `max_tokens` (a long turn stands alone).

    Every window counts the session's date-time once; a turn costs its json line in every format, so
    all formats cut the same windows.
    """
    return pack_batches(session.turns, max_tokens, lambda turn, _position: estimate_tokens(render_turn_line(turn)),
                        base=estimate_tokens(session.date_time))


def session_date(session: Session) -> str:
    """The session's day as YYYY-MM-DD ('' when the date-time cannot be parsed)."""
    parsed: datetime | None = session.parsed
    if parsed is None:
        from recollect.dialogue.loaders import parse_session_datetime

        parsed = parse_session_datetime(session.date_time, allow_iso=True)
    return parsed.date().isoformat() if parsed else ""
