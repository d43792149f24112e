"""MRAgent's reply validation: call A's sentences, topics and facts, and call B's cues, checked against
the window they were asked about (README.md in this folder, "What ingestion builds").

Ids the model invents are dropped and reported, every turn gets at least one sentence, a cue stands
only where it occurs verbatim in its sentence, and every sentence ends with its speaker as a cue. With
`mra_ingest_sentences="turn"` call A writes rows without sentences: each turn is then exactly one event
whose sentence is `turn_sentence(turn)`, with its row's tag and topics and the date its `times` row gives
(else the session date); a tag that is only a speaker's name becomes the "other" tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from recollect.dates import parse_day
from recollect.dialogue.models import Turn
from recollect.graphs.mragent.cues import FALLBACK_CUES, MAX_CUES, fallback_cues
from recollect.graphs.mragent.formats import CueReply, RewriteReply
from recollect.graphs.mragent.layout import OTHER_TAG, event_id, id_turn, topic_id, turn_shapes
from recollect.spoken_days import spoken_day

_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")


def normalise_time(text: Any, session_date: str) -> str:
    """An absolute YYYY-MM-DD; a range of two dates becomes its midpoint; anything else the session date."""
    found = []
    for m in _ISO.finditer(str(text or "")):
        try:
            found.append(date(int(m[1]), int(m[2]), int(m[3])))
        except ValueError:
            continue
    if not found:
        return session_date
    if len(found) >= 2:
        a, b = sorted(found[:2])
        return date.fromordinal((a.toordinal() + b.toordinal()) // 2).isoformat()
    return found[0].isoformat()


def derived_day(turn: Turn, session_date: str) -> str:
    """The day a turn's own text names, said on its session's date (`recollect.spoken_days.spoken_day`), as
    YYYY-MM-DD; "" when it names none or the session has no date."""
    ref = parse_day(session_date)
    day = spoken_day(turn.full_text, ref) if ref else None
    return day.isoformat() if day else ""


@dataclass
class WindowResult:
    """One window's validated call-A reply: its events, topics and facts, plus the notes for the report."""

    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cues: dict[str, list[str]] = field(default_factory=dict)  # event id → cues written by call A (compact_merged)


def turn_sentence(turn: Turn) -> str:
    """A turn as its event's sentence when call A writes none: `<speaker>: <text>` (the name tells who "I"
    is), with the image caption as `Turn.full_text` appends it."""
    return f"{turn.speaker}: {turn.full_text}"


def sentence_origin(sentence: Any, by_id: dict[str, Turn], shapes: Any, numbers: dict[str, str] | None) -> str:
    """The turn a call-A sentence comes from: its origin, else a turn named in its id; a number of the compact
    prompt read as its turn. Not necessarily a turn of the window (the caller checks)."""
    origin = sentence.origin or (id_turn(sentence.id, shapes) or "")
    if numbers is not None and origin not in by_id:
        origin = numbers.get(origin, origin)
    return str(origin)


def empty_rewrite(reply: RewriteReply, window: list[Turn], numbers: dict[str, str] | None = None,
                  from_turns: bool = False) -> str | None:
    """Why a call-A reply that fits the schema is still no reply (no sentence with text comes from a turn of
    the window, or with `from_turns` no row names one: every turn would be a fallback), else None."""
    by_id = {t.id: t for t in window}
    shapes = turn_shapes(by_id)
    if any((from_turns or s.text) and sentence_origin(s, by_id, shapes, numbers) in by_id for s in reply.sentences):
        return None
    if from_turns:
        return "no row names a turn of this session: write one row for every turn, starting with its turn number"
    return "no sentence comes from a turn of this session: write at least one sentence for every turn, naming its turn"


def numbered_origin(origin: str, by_id: dict[str, Turn], numbers: dict[str, str] | None) -> str:
    """A row's turn: a turn id as it is, else (the compact formats) the turn its local number names."""
    return origin if numbers is None or origin in by_id else numbers.get(origin, origin)


def turn_days(reply: RewriteReply, by_id: dict[str, Turn], numbers: dict[str, str] | None,
              notes: list[str]) -> dict[str, str]:
    """The dates call A's `times` rows give (mra_ingest_sentences="turn"), by turn id; the first row for a
    turn wins, rows naming no turn of the window are dropped with a note."""
    days: dict[str, str] = {}
    unknown = []
    for row in getattr(reply, "times", []):
        origin = numbered_origin(row.origin, by_id, numbers)
        if origin in by_id:
            days.setdefault(origin, row.time)
        else:
            unknown.append(row.origin or "?")
    if unknown:
        notes.append(f"rewrite: dropped times with unknown origin {sorted(set(unknown))}")
    return days


def validate_rewrite(
    reply: RewriteReply | None, window: list[Turn], sdate: str, topic_start: int, session_index: int,
    numbers: dict[str, str] | None = None, from_turns: bool = False, derived: bool = False,
) -> WindowResult:
    """Apply call A's validation: origins in the window, ids renormalised, times, tags, topics,
    and one fallback sentence for every turn the model left out.

    `numbers` (the compact formats) maps the turn numbers shown in the prompt to turn ids; an origin
    may then be a number or a turn id, and a topic reference a topic's number. `from_turns`
    (`mra_ingest_sentences="turn"`): the reply's rows carry no sentence; every turn is one event whose
    sentence is `turn_sentence`, tagged by its first row (later rows for the same turn are dropped).
    `derived` (`mra_turn_labels`): a row's tag is its first topic's title and its date the day its turn's
    text names (`derived_day`); a tag or date the reply writes anyway is not read."""
    res = WindowResult()
    by_id = {t.id: t for t in window}
    # A sentence without an origin may name its turn in its id (`D1:3-1`); an id shaped like the window's
    # turn ids counts as naming a turn even when it is not one of them, so the drop note names that turn.
    shapes = turn_shapes(by_id)
    topic_map: dict[str, str] = {}
    if reply is not None:
        for n, (tid, text) in enumerate(((k, v) for k, v in reply.topics.items() if v.strip()), start=topic_start):
            if n - topic_start >= 10:  # at most 10 topics per window; a small model pads with filler
                break
            gid = topic_id(session_index, n)
            topic_map[tid.strip()] = gid
            res.topics[gid] = {"text": text.strip(), "events": []}
    counters: dict[str, int] = {}
    produced: dict[str, list[dict[str, Any]]] = {t.id: [] for t in window}
    if reply is not None:
        invented, repeated = [], 0
        days = turn_days(reply, by_id, numbers, res.notes) if from_turns else {}
        speakers = {w.casefold() for t in window for w in t.speaker.split()}
        for s in reply.sentences:
            origin = sentence_origin(s, by_id, shapes, numbers)
            if origin not in by_id:
                invented.append(origin or s.id or "?")
                continue
            if from_turns and produced[origin]:
                repeated += 1
                continue
            text = turn_sentence(by_id[origin]) if from_turns else s.text
            if not text:
                continue
            refs = s.topics if numbers is None else [t if t in topic_map else f"t{t}" for t in s.topics]
            topics = [topic_map[t] for t in refs if t in topic_map]
            tag = " ".join(s.tag.split()[:2])
            if derived:
                tag = " ".join(res.topics[topics[0]]["text"].split()) if topics else ""
            if from_turns and tag and all(w.casefold() in speakers for w in tag.split()):
                # A speaker's name links every turn of theirs to every other: it counts as no tag, as an empty
                # one does (no note: the event is built as asked, and a note would mark the session's build).
                tag = ""
            said = derived_day(by_id[origin], sdate) if derived else s.time or days.get(origin, "")
            produced[origin].append({"text": text, "tag": tag or OTHER_TAG,
                                     "time": normalise_time(said, sdate),
                                     "topics": topics, "cues": s.cues})
        if invented:
            kind = "rows" if from_turns else "sentences"
            res.notes.append(f"rewrite: dropped {kind} with unknown origin {sorted(set(invented))}")
        if repeated:
            res.notes.append(f"rewrite: dropped {repeated} more row(s) for a turn that already had one")
    missing = [tid for tid, items in produced.items() if not items]
    if reply is not None and missing:
        kind = "row" if from_turns else "sentence"
        res.notes.append(f"rewrite: {len(missing)} turn(s) without a {kind} got a fallback: {missing}")
    for turn in window:
        fallback = turn_sentence(turn) if from_turns else turn.full_text
        items = produced[turn.id] or [{"text": fallback, "tag": OTHER_TAG, "time": sdate, "topics": [], "cues": []}]
        for item in items:
            counters[turn.id] = counters.get(turn.id, 0) + 1
            eid = event_id(turn.id, counters[turn.id])
            res.events[eid] = {
                "origin": turn.id,
                "speaker": turn.speaker,
                "content": turn.full_text,  # raw turn text (with caption): what the agent is shown
                "rewritten": item["text"],  # embedded and used for cue extraction only
                "tag": item["tag"],
                "time": item["time"],
                "session_date": sdate,
                "session": session_index,
                "topics": item["topics"],
                "cues": [],
            }
            for gid in item["topics"]:
                res.topics[gid]["events"].append(eid)
            if item["cues"]:
                res.cues[eid] = list(item["cues"])
    if reply is not None:
        for f in reply.personal_facts:
            origin = numbered_origin(f.origin, by_id, numbers)
            if origin in by_id and f.person and f.text:
                res.facts.append({"person": f.person, "aspect": f.aspect or "general", "fact": f.text,
                                  "origin": origin})
            elif f.text:
                res.notes.append(f"rewrite: dropped personal fact with unknown origin {f.origin!r}")
    return res


def apply_cues(reply: CueReply | None, events: dict[str, dict[str, Any]], accept_turn_ids: bool = True,
               numbers: dict[str, str] | None = None, fallback_limit: int = FALLBACK_CUES) -> list[str]:
    """Call B's validation: unknown ids dropped, non-verbatim cues discarded, at most 30 kept,
    fallback tokens (at most `fallback_limit`) for a sentence left without cues, and the speaker's
    name always added.

    `numbers` (the compact format) maps the sentence numbers shown in the prompt to event ids."""
    notes: list[str] = []
    got: dict[str, list[str]] = {}
    if reply is not None:
        got, notes = _placed_cues(reply, events, accept_turn_ids, numbers)
    fallback = []
    for eid, ev in events.items():
        cues = got.get(eid) or []
        if not cues:
            cues = fallback_cues(ev["rewritten"], fallback_limit)
            fallback.append(eid)
        if ev["speaker"] and ev["speaker"].lower() not in (c.lower() for c in cues):
            cues = [*cues, ev["speaker"]]
        ev["cues"] = cues
    if fallback and reply is not None:
        notes.append(f"keywords: fallback tokens for {len(fallback)} sentence(s) without valid cues")
    return notes


def empty_cues(reply: CueReply, events: dict[str, dict[str, Any]], accept_turn_ids: bool = True,
               numbers: dict[str, str] | None = None) -> str | None:
    """Why a call-B reply that fits the schema is still no reply (not one cue stands in any sentence: every
    sentence would take fallback tokens), else None."""
    got, _ = _placed_cues(reply, events, accept_turn_ids, numbers)
    if any(got.values()):
        return None
    return "no cue stands: give every sentence cues copied verbatim from its text, under its sentence number"


def _placed_cues(reply: CueReply, events: dict[str, dict[str, Any]], accept_turn_ids: bool,
                 numbers: dict[str, str] | None) -> tuple[dict[str, list[str]], list[str]]:
    """The cues of a call-B reply that stand, by event id (verbatim in their sentence, at most 30 each), and
    the notes on what was dropped. Events are not changed."""
    notes: list[str] = []
    got: dict[str, list[str]] = {}
    by_origin: dict[str, list[str]] = {}
    for eid, ev in events.items():
        by_origin.setdefault(ev["origin"], []).append(eid)
    # A small model often answers with the turn id ("D1:3") instead of its sentence ids
    # ("D1:3-1"): such a reply is read as covering that turn's sentences, and the verbatim check
    # below still decides, per sentence, which cues stand.
    # (`accept_turn_ids=False` is the spec's strict reading: such ids are unknown and dropped.)
    numbers = numbers or {}

    def targets(item_id: str) -> list[str]:
        if item_id in events:
            return [item_id]
        if item_id in numbers:
            return [numbers[item_id]]
        return by_origin.get(item_id, []) if accept_turn_ids else []

    resolved = [(item, targets(item.id)) for item in reply.sentences]
    unknown = [item.id for item, eids in resolved if not eids]
    if unknown:
        notes.append(f"keywords: dropped cues for unknown sentence ids {unknown}")
    by_turn = [item.id for item, eids in resolved if eids and item.id not in events and item.id not in numbers]
    if by_turn:
        notes.append(f"keywords: {len(by_turn)} reply id(s) named a turn, read as its sentences")
    discarded = 0
    for item, eids in resolved:
        cues = [" ".join(cue.split()) for cue in item.cues]
        placed: set[str] = set()
        for eid in eids:
            low = events[eid]["rewritten"].lower()
            keep: list[str] = []
            for c in cues:
                if c and c.lower() in low and c.lower() not in (k.lower() for k in keep):
                    keep.append(c)
                    placed.add(c.lower())
            got.setdefault(eid, []).extend(keep[: MAX_CUES - len(got.get(eid, []))])
        if eids:
            discarded += sum(1 for c in cues if c.lower() not in placed or not c)
    if discarded:
        notes.append(f"keywords: discarded {discarded} cue(s) not found verbatim in their sentence")
    return got, notes
