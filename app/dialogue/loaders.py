"""Dialogue loaders: LoCoMo JSON and the project's simple JSON format → `Conversation`.

Both formats are detected from the file's shape, so every command takes one `path` argument. Bad input
raises `DialogueError` whose message names the file, the record (`sessions[2].turns[4]`,
`conv-26 session_3[5]`) and the field, because a user fixing a hand-written file needs all three.
The simple format is documented in `docs/dialogue-format.md`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from recollect.dialogue.json_input import parse_json_text
from recollect.dialogue.models import Conversation, DialogueError, Session, Turn

log = logging.getLogger(__name__)

# Published checksums (data/locomo/README.md); a mismatch only warns, since subsets are legitimate input.
KNOWN_SHA256 = {
    "locomo10.json": "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4",
    "locomo_dev.json": "a76e644774afec96aa6088c0e502d761ee64b79d3c681bf16101eecde74d2f31",
}

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# LoCoMo's only date-time form: `1:56 pm on 8 May, 2023` (hour and day without leading zeros).
_LOCOMO_DT = re.compile(
    r"(?P<h>[1-9]|1[0-2]):(?P<m>[0-5]\d) (?P<ampm>am|pm) on (?P<d>[1-9]|[12]\d|3[01]) "
    r"(?P<month>[A-Z][a-z]+), (?P<y>\d{4})"
)
_SESSION_KEY = re.compile(r"session_(\d+)")
_LOCOMO_EXTRA_KEYS = ("event_summary", "observation", "session_summary", "qa")


def parse_locomo_datetime(text: str) -> datetime | None:
    """Strictly parse `H:MM am|pm on D Month, YYYY`; `12:xx am` is 00:xx. None when it does not fit."""
    m = _LOCOMO_DT.fullmatch(text.strip())
    if m is None or m["month"] not in MONTHS:
        return None
    hour = int(m["h"]) % 12 + (12 if m["ampm"] == "pm" else 0)
    try:
        return datetime(int(m["y"]), MONTHS.index(m["month"]) + 1, int(m["d"]), hour, int(m["m"]))
    except ValueError:  # e.g. 31 February
        return None


def parse_session_datetime(text: str, allow_iso: bool = False) -> datetime | None:
    """LoCoMo form first; the simple format also accepts ISO 8601 (a timezone is dropped: naive wall time)."""
    parsed = parse_locomo_datetime(text)
    if parsed is None and allow_iso and text.strip():
        try:
            parsed = datetime.fromisoformat(text.strip()).replace(tzinfo=None)
        except ValueError:
            parsed = None
    return parsed


# --------------------------------------------------------------------------------------------- reading


def read_json(path: str | Path) -> Any:
    """Read a JSON file; a missing file, bad JSON, nesting too deep or text that cannot be stored becomes a
    `DialogueError` naming the position."""
    p = Path(path)
    if p.is_dir():
        raise DialogueError(f"{p}: is a directory, not a dialogue file")
    if not p.is_file():
        raise DialogueError(f"{p}: dialogue file not found")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DialogueError(f"{p}: cannot read file: {exc}") from exc
    _check_known_checksum(p, raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DialogueError(f"{p}: not UTF-8 text (byte {exc.start})") from exc
    try:
        return parse_json_text(text, str(p))  # bounded nesting, storable text (recollect.dialogue.json_input)
    except json.JSONDecodeError as exc:
        raise DialogueError(f"{p}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc


def _check_known_checksum(path: Path, raw: bytes) -> None:
    expected = KNOWN_SHA256.get(path.name)
    if expected and hashlib.sha256(raw).hexdigest() != expected:
        log.warning(
            "%s: sha256 differs from the published LoCoMo file of that name; results may not compare", path
        )


def is_locomo(data: Any) -> bool:
    """LoCoMo = a list of samples carrying a `conversation` object (or one such sample).

    One LoCoMo-looking item is enough: a broken sample in a LoCoMo file should get a LoCoMo error message,
    not a complaint about missing simple-format `sessions`.
    """
    if isinstance(data, dict):
        return "conversation" in data
    return isinstance(data, list) and any(isinstance(s, dict) and "conversation" in s for s in data)


def load_dialogues(path: str | Path) -> list[Conversation]:
    """Every conversation in a LoCoMo or simple-format JSON file, in file order."""
    p = Path(path)
    data = read_json(p)
    if is_locomo(data):
        samples = [data] if isinstance(data, dict) else data
        convs = [conversation_from_locomo(s, p, i) for i, s in enumerate(samples)]
    elif isinstance(data, dict | list):
        convs = _simple_conversations(data, p)
    else:
        raise DialogueError(
            f"{p}: top level must be a JSON object or a list of objects, got {type(data).__name__}"
        )
    _check_unique_ids(convs, p)
    return convs


def load_conversation(path: str | Path, conversation_id: str | None = None) -> Conversation:
    """One conversation; `conversation_id` is required when the file holds several."""
    convs = load_dialogues(path)
    ids = [c.id for c in convs]
    if conversation_id is None:
        if len(convs) == 1:
            return convs[0]
        raise DialogueError(f"{path}: holds {len(convs)} conversations; choose one of: {', '.join(ids)}")
    for c in convs:
        if c.id == conversation_id:
            return c
    raise DialogueError(f"{path}: no conversation with id {conversation_id!r}; available: {', '.join(ids)}")


def read_locomo_samples(path: str | Path) -> list[dict[str, Any]]:
    """The raw LoCoMo samples (for question loading); a non-LoCoMo file is a `DialogueError`."""
    data = read_json(path)
    if not is_locomo(data):
        raise DialogueError(f"{path}: not a LoCoMo file (expected a list of samples with 'conversation')")
    return [data] if isinstance(data, dict) else list(data)


def _check_unique_ids(convs: Iterable[Conversation], path: Path) -> None:
    seen: set[str] = set()
    for c in convs:
        if c.id in seen:
            raise DialogueError(f"{path}: conversation id {c.id!r} appears more than once")
        seen.add(c.id)


# --------------------------------------------------------------------------------------------- LoCoMo


def conversation_from_locomo(sample: Any, path: str | Path, position: int = 0) -> Conversation:
    """Build a `Conversation` from one LoCoMo sample (`position` names it in errors)."""
    if not isinstance(sample, dict):
        raise DialogueError(f"{path}: [{position}]: sample must be an object, got {type(sample).__name__}")
    sample_id = sample.get("sample_id")
    if not isinstance(sample_id, str) or not sample_id:
        raise DialogueError(f"{path}: [{position}]: field 'sample_id' is missing or not a non-empty string")
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise DialogueError(f"{path}: {sample_id}: field 'conversation' is missing or not an object")
    speakers = []
    for key in ("speaker_a", "speaker_b"):
        name = conv.get(key)
        if not isinstance(name, str) or not name.strip():
            raise DialogueError(f"{path}: {sample_id}: field 'conversation.{key}' is missing or empty")
        speakers.append(name)

    # Sessions come from content keys only (dangling `session_N_date_time` keys exist, quirk Q5),
    # ordered by the integer N because string order puts session_10 before session_2.
    numbered = sorted((int(m[1]), k) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    sessions: list[Session] = []
    seen_ids: dict[str, str] = {}
    for number, key in numbered:
        turns_raw = conv[key]
        if not isinstance(turns_raw, list):
            raise DialogueError(
                f"{path}: {sample_id} {key}: turns must be a list, got {type(turns_raw).__name__}"
            )
        if not turns_raw:
            continue
        date_raw = conv.get(f"{key}_date_time")
        date_text = date_raw if isinstance(date_raw, str) else ""
        parsed = parse_locomo_datetime(date_text)
        if parsed is None:
            log.warning(
                "%s: %s %s_date_time %r does not parse; keeping it raw", path, sample_id, key, date_raw
            )
        turns = [
            _locomo_turn(t, path, f"{sample_id} {key}[{k - 1}]", number, k, date_text, seen_ids)
            for k, t in enumerate(turns_raw, start=1)
        ]
        sessions.append(Session(index=number, date_time=date_text, parsed=parsed, turns=tuple(turns)))
    if not sessions:
        raise DialogueError(f"{path}: {sample_id}: conversation has no non-empty 'session_N' list")
    extra = {k: sample[k] for k in _LOCOMO_EXTRA_KEYS if k in sample}
    extra["format"] = "locomo"
    return Conversation(
        id=sample_id, speakers=tuple(speakers), sessions=tuple(sessions), source=str(path), extra=extra
    )


def _locomo_turn(
    raw: Any, path: str | Path, record: str, session: int, k: int, date_text: str, seen: dict[str, str]
) -> Turn:
    if not isinstance(raw, dict):
        raise DialogueError(f"{path}: {record}: turn must be an object, got {type(raw).__name__}")
    speaker = raw.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        raise DialogueError(f"{path}: {record}: field 'speaker' is missing or empty")
    caption = raw.get("blip_caption")
    caption = caption.strip() if isinstance(caption, str) and caption.strip() else None
    text = raw.get("text")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise DialogueError(f"{path}: {record}: field 'text' must be a string")
    if not text.strip() and caption is None:
        raise DialogueError(f"{path}: {record}: field 'text' is missing or empty (and no 'blip_caption')")
    dia_id = raw.get("dia_id") or f"D{session}:{k}"
    if not isinstance(dia_id, str):
        raise DialogueError(f"{path}: {record}: field 'dia_id' must be a string")
    if dia_id in seen:
        raise DialogueError(f"{path}: {record}: field 'dia_id' {dia_id!r} duplicates {seen[dia_id]}")
    seen[dia_id] = record
    urls = raw.get("img_url") or ()
    urls = (urls,) if isinstance(urls, str) else tuple(str(u) for u in urls)
    return Turn(
        id=dia_id,
        speaker=speaker,
        text=text,
        session=session,
        index=k,
        date_time=date_text,
        caption=caption,
        img_urls=urls,
    )


# --------------------------------------------------------------------------------------------- simple format


def _simple_conversations(data: dict[str, Any] | list[Any], path: Path) -> list[Conversation]:
    if isinstance(data, dict):
        return [_simple_conversation(data, path, "", path.stem)]
    if not data:
        raise DialogueError(f"{path}: the list holds no conversations")
    return [_simple_conversation(obj, path, f"[{i}]", f"{path.stem}-{i + 1}") for i, obj in enumerate(data)]


def _simple_conversation(obj: Any, path: Path, record: str, default_id: str) -> Conversation:
    where = f"{path}: {record}" if record else f"{path}:"
    if not isinstance(obj, dict):
        raise DialogueError(f"{where} conversation must be an object, got {type(obj).__name__}")
    conv_id = obj.get("id", default_id)
    if not isinstance(conv_id, str) or not conv_id.strip():
        raise DialogueError(f"{where} field 'id' must be a non-empty string")
    prefix = f"{record}." if record else ""
    declared = obj.get("speakers")
    if declared is not None and (
        not isinstance(declared, list) or not all(isinstance(s, str) and s.strip() for s in declared)
    ):
        raise DialogueError(f"{path}: {prefix}speakers: must be a list of non-empty strings")
    sessions_raw = obj.get("sessions")
    if not isinstance(sessions_raw, list) or not sessions_raw:
        raise DialogueError(f"{path}: {prefix}sessions: field is missing or not a non-empty list")

    seen: dict[str, str] = {}
    found: list[str] = []
    sessions: list[Session] = []
    for n, sess in enumerate(sessions_raw, start=1):
        rec = f"{prefix}sessions[{n - 1}]"
        if not isinstance(sess, dict):
            raise DialogueError(f"{path}: {rec}: session must be an object, got {type(sess).__name__}")
        date_text = sess.get("date_time", "")
        if not isinstance(date_text, str):
            raise DialogueError(f"{path}: {rec}.date_time: must be a string")
        parsed = parse_session_datetime(date_text, allow_iso=True)
        if parsed is None and date_text.strip():
            log.warning("%s: %s.date_time %r does not parse; keeping it raw", path, rec, date_text)
        turns_raw = sess.get("turns")
        if not isinstance(turns_raw, list):
            raise DialogueError(f"{path}: {rec}.turns: field is missing or not a list")
        turns = []
        for k, t in enumerate(turns_raw, start=1):
            turn = _simple_turn(t, path, f"{rec}.turns[{k - 1}]", n, k, date_text, seen)
            if declared is not None and turn.speaker not in declared:
                raise DialogueError(
                    f"{path}: {rec}.turns[{k - 1}].speaker: {turn.speaker!r} is not in 'speakers' {declared}"
                )
            if turn.speaker not in found:
                found.append(turn.speaker)
            turns.append(turn)
        sessions.append(Session(index=n, date_time=date_text, parsed=parsed, turns=tuple(turns)))
    if not any(s.turns for s in sessions):  # an empty session is allowed, a dialogue with no turn is not
        where = f"{prefix}sessions[0].turns: the only session has" if len(sessions) == 1 else (
            f"{prefix}sessions: all {len(sessions)} sessions ({prefix}sessions[0]..[{len(sessions) - 1}]) have")
        raise DialogueError(f"{path}: {where} no turns; a dialogue needs at least one turn")
    known = {"id", "speakers", "sessions"}
    extra: dict[str, Any] = {k: v for k, v in obj.items() if k not in known}
    extra["format"] = "simple"
    speakers = tuple(declared) if declared is not None else tuple(found)
    return Conversation(
        id=conv_id, speakers=speakers, sessions=tuple(sessions), source=str(path), extra=extra
    )


def _simple_turn(
    raw: Any, path: Path, record: str, session: int, k: int, date_text: str, seen: dict[str, str]
) -> Turn:
    if not isinstance(raw, dict):
        raise DialogueError(f"{path}: {record}: turn must be an object, got {type(raw).__name__}")
    speaker = raw.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        raise DialogueError(f"{path}: {record}.speaker: field is missing or empty")
    caption = raw.get("image_caption")
    if caption is not None and not isinstance(caption, str):
        raise DialogueError(f"{path}: {record}.image_caption: must be a string")
    caption = caption.strip() if caption and caption.strip() else None
    text = raw.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise DialogueError(f"{path}: {record}.text: must be a string")
    if not text.strip() and caption is None:
        raise DialogueError(f"{path}: {record}.text: field is missing or empty (and no 'image_caption')")
    turn_id = raw.get("id", f"D{session}:{k}")
    if not isinstance(turn_id, str) or not turn_id.strip():
        raise DialogueError(f"{path}: {record}.id: must be a non-empty string")
    if turn_id in seen:
        raise DialogueError(
            f"{path}: {record}.id: duplicate turn id {turn_id!r} (first used at {seen[turn_id]})"
        )
    seen[turn_id] = record
    urls = raw.get("img_urls", [])
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise DialogueError(f"{path}: {record}.img_urls: must be a list of strings")
    return Turn(
        id=turn_id,
        speaker=speaker,
        text=text,
        session=session,
        index=k,
        date_time=date_text,
        caption=caption,
        img_urls=tuple(urls),
    )
