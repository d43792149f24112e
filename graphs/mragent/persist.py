"""MRAgent's persistence: one session's events and topics written to the vector indexes and `ws.docs`,
the derived indexes (cue index, persona map, timeline) rebuilt from all events, and the stamps that
decide which sessions a re-ingest rebuilds. The layout is in `layout.py`; README.md in this folder
describes every stored kind.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recollect.dialogue.models import Session
from recollect.graphs.mragent.cues import cue_norm, cue_tokens
from recollect.graphs.mragent.ingest_formats import lexical_cues, turn_sentences
from recollect.graphs.mragent.layout import (
    K_CUE,
    K_EVENT,
    K_META,
    K_PERSONA,
    K_SESSION,
    K_TOPIC,
    OTHER_TAG,
)
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.windows import session_date
from recollect.memory.vectors import Unit, VectorIndex
from recollect.memory.workspace import Workspace


@dataclass
class SessionMemory:
    """What one session adds to the graph, all windows together (event and topic ids are unique in it)."""

    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: list[dict[str, Any]] = field(default_factory=list)
    # Some call's reply was unusable, so part of the session is a fallback: its stamp says so and the
    # next ingest builds it again (the valid replies come from the LLM cache, the failed ones are asked again).
    fallback: bool = False


def session_hash(session: Session, ctx: MRAgentContext) -> str:
    """The session stamp: a session is rebuilt when its content, window size, reply format, cue source or
    sentence source changes (the stamps keep their earlier form for the json format, for LLM cues and for
    LLM sentences, so graphs built before those settings stay valid). A rebuild reads call A from the LLM
    cache."""
    base = f"{session.content_hash()}:{ctx.mra_ingest_window_tokens}"
    if ctx.mra_ingest_format != "json":
        base = f"{base}:{ctx.mra_ingest_format}"
    if lexical_cues(ctx):
        base = f"{base}:lexical"
    if turn_sentences(ctx):
        base = f"{base}:turns"
    return base


def save_session(
    ws: Workspace, namespace: str, session: Session, ctx: MRAgentContext, built: SessionMemory,
    old: dict[str, Any], ev_index: VectorIndex, tp_index: VectorIndex,
) -> int:
    """Replace one session's events, topics and facts (`old` is its previous stamp record, or {});
    returns the number of units embedded."""
    events, topics = built.events, built.topics
    stale_events = sorted(set(old.get("events") or []) - set(events))
    stale_topics = sorted(set(old.get("topics") or []) - set(topics))
    turns = {eid: ev["origin"] for eid, ev in events.items()}
    event_units = [
        Unit(id=eid, text=ev["rewritten"], turn_ids=[ev["origin"]],
             metadata={"origin": ev["origin"], "tag": ev["tag"], "time": ev["time"], "session": session.index})
        for eid, ev in events.items()
    ]
    topic_units = [
        Unit(id=gid, text=tp["text"], turn_ids=sorted({turns[e] for e in tp["events"]}),
             metadata={"session": session.index})
        for gid, tp in topics.items()
    ]
    # Vectors first (idempotent upserts), then the docs in one transaction: a crash in between
    # leaves the session unstamped, and the next run redoes it from the LLM cache.
    ev_index.delete(stale_events)
    tp_index.delete(stale_topics)
    embedded = ev_index.upsert(event_units) + tp_index.upsert(topic_units)
    with ws.docs.transaction():
        for eid in stale_events:
            ws.docs.delete(namespace, K_EVENT, eid)
        for gid in stale_topics:
            ws.docs.delete(namespace, K_TOPIC, gid)
        ws.docs.put_many(namespace, K_EVENT, events)
        ws.docs.put_many(namespace, K_TOPIC, topics)
        ws.docs.put(namespace, K_SESSION, str(session.index), {
            "hash": session_hash(session, ctx), "date": session_date(session), "date_time": session.date_time,
            "events": list(events), "topics": list(topics), "facts": built.facts, "fallback": built.fallback,
        })
    return embedded


def _in_order(ws: Workspace, namespace: str, kind: str, position: Callable[[str, Any], tuple[Any, ...]]) -> dict[str, Any]:
    """A kind's documents in conversation order, rewritten so when they are not: the read side
    (`store.CueTagGraph`) follows the stored order, and a session built again is stored last."""
    docs = ws.docs.items(namespace, kind)
    ordered = dict(sorted(docs.items(), key=lambda kv: position(*kv)))
    if list(ordered) != list(docs):
        with ws.docs.transaction():
            ws.docs.delete_kind(namespace, kind)
            ws.docs.put_many(namespace, kind, ordered)
    return ordered


def _numbers(ident: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", ident))


def rebuild_indexes(ws: Workspace, namespace: str) -> None:
    """Recompute the cue index, persona map and timeline from all events (cheap, always consistent), with
    events, topics and sessions stored in conversation order, as a clean build writes them."""
    rank = {tid: n for n, tid in enumerate(ws.turns(namespace))}
    with ws.docs.transaction():
        events = _in_order(ws, namespace, K_EVENT, lambda eid, ev: (rank.get(ev.get("origin"), len(rank)),
                                                                    _numbers(eid.rsplit("-", 1)[-1]), eid))
        _in_order(ws, namespace, K_TOPIC, lambda gid, _: (_numbers(gid), gid))
        _in_order(ws, namespace, K_SESSION, lambda key, _: (_numbers(key), key))
    cues: dict[str, dict[str, Any]] = {}
    timeline: dict[str, list[str]] = {}
    for eid, ev in events.items():
        for cue in ev.get("cues") or []:
            norm = cue_norm(cue)
            if not norm:
                continue
            entry = cues.setdefault(norm, {"cue": cue, "tokens": sorted(cue_tokens(cue)), "tags": {}})
            tag_key = ev.get("tag") or OTHER_TAG
            bucket = entry["tags"].setdefault(tag_key, [])
            if eid not in bucket:
                bucket.append(eid)
        timeline.setdefault(ev.get("time") or "", []).append(eid)
    persona: dict[str, dict[str, list[dict[str, str]]]] = {}
    for raw in ws.docs.items(namespace, K_SESSION).values():
        for f in raw.get("facts") or []:
            person = persona.setdefault(f["person"], {})
            person.setdefault(f["aspect"], []).append({"origin": f["origin"], "fact": f["fact"]})
    with ws.docs.transaction():
        ws.docs.delete_kind(namespace, K_CUE)
        ws.docs.put_many(namespace, K_CUE, cues)
        ws.docs.delete_kind(namespace, K_PERSONA)
        ws.docs.put_many(namespace, K_PERSONA, persona)
        ws.docs.put(namespace, K_META, "timeline", dict(sorted(timeline.items())))
        ws.docs.put(namespace, K_META, "version", {"events": len(events), "stamp": _stamp(ws, namespace)})


def needs_build(stamp: dict[str, Any] | None, session: Session, ctx: MRAgentContext) -> bool:
    """Whether a session is (re)built: never built, changed since, or built from a fallback."""
    return not stamp or stamp.get("hash") != session_hash(session, ctx) or bool(stamp.get("fallback"))


def indexes_current(ws: Workspace, namespace: str) -> bool:
    """Whether the derived indexes were rebuilt after the last session was saved (a crash may fall between)."""
    version = ws.docs.get(namespace, K_META, "version")
    return bool(version) and version.get("stamp") == _stamp(ws, namespace) \
        and version.get("events") == ws.docs.count(namespace, K_EVENT)


def _stamp(ws: Workspace, namespace: str) -> str:
    """The build stamp the read side caches a loaded graph under: changes whenever a session does,
    including a fallback session built again from the same content."""
    hashes = [v.get("hash", "") + ("!" if v.get("fallback") else "") for v in ws.docs.items(namespace, K_SESSION).values()]
    return hashlib.sha256("".join(sorted(hashes)).encode()).hexdigest()[:16]
