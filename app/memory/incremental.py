"""A chat's newest turns appended to a namespace at once: the turns, their vectors and MemR3's chunks.

This is the part of `recollect.agent_memory` that runs on the reply path: it calls no model, and writes the store
once and one vector collection (MemR3's chunks, what recall reads). The turns' own vectors (read by MGRetrieval
only) and the builders that call a model (HyMem, MGRetrieval, MRAgent) follow in the background
(recollect.agent_memory.queue).

Sessions. A session is a run of consecutive turns of one thread on one day: new turns extend the namespace's
last session when it holds turns of the same thread and the same day, and open a new session otherwise (a
new thread, a new day, or turns of another thread in between). So sessions are only ever appended, or the
last one extended: every method's memory of the earlier sessions stays valid, and HyMem's summaries,
MGRetrieval's keywords and MRAgent's events of a session cover one sitting, as a dialogue file's do. A
turn's date-time is its own timestamp, in LoCoMo's form, so relative dates resolve against the day it was said.

Turn ids are `D<session>:<position>`, LoCoMo's shape, short enough for a small model to cite; each message's
key (recollect.dialogue.chat) maps to its turn id, so the same message remembered twice adds nothing.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from recollect.dialogue.chat import ChatTurn, locomo_time
from recollect.dialogue.loaders import parse_locomo_datetime
from recollect.dialogue.models import Conversation, Session, Turn
from recollect.memory.chunks import ChunkSettings, chunk_index, chunk_turns
from recollect.memory.embeddings import embedder_name
from recollect.memory.workspace import NamespaceError, NamespaceInfo, Workspace, validate_namespace

CHAT_CONVERSATION = "chat"  # the conversation id of a namespace that remember creates
KEY_KIND = "chat_key"  # message key -> turn id
TAIL_KIND, TAIL_KEY = "chat", "tail"  # the session new turns may extend: its thread, day and next position
CHUNKS = "memr3"  # the builder whose memory (MemR3's chunks, also rag's) is extended here
TURN_VECTORS = "turns"  # the turns' own vectors (MGRetrieval's dense similarity): a background step

_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextmanager
def namespace_lock(ws: Workspace, namespace: str) -> Any:
    """One writer of a namespace's chat at a time in this process (session numbers are read, then written)."""
    key = (str(ws.data_dir), namespace)
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        yield


@dataclass
class Appended:
    """What one append did: the turn ids added, the sessions they went to, how many messages were already
    remembered, and whether MemR3's chunks were extended with them (else `chunk_error` says why)."""

    added: list[str] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)
    skipped: int = 0
    chunks_extended: bool = False
    chunk_error: str | None = None
    created: bool = False


def _unseen(ws: Workspace, namespace: str, turns: list[ChatTurn]) -> list[ChatTurn]:
    """The turns whose key no earlier remember stored. Read from the newest back, stopping at the first one
    known: a thread's messages are remembered in order, so an agent passing its whole history each time
    costs a lookup per new message, not per message."""
    fresh: list[ChatTurn] = []
    seen: set[str] = set()
    for turn in reversed(turns):
        if turn.key in seen:
            continue
        if ws.docs.get(namespace, KEY_KIND, turn.key) is not None:
            break
        seen.add(turn.key)
        fresh.append(turn)
    return fresh[::-1]


def _stored_session(ws: Workspace, namespace: str, index: int) -> tuple[str, list[Turn]]:
    raw = ws.docs.get(namespace, "session", str(index)) or {}
    turns = []
    for tid in raw.get("turn_ids") or []:
        row = ws.docs.get(namespace, "turn", tid)
        if row is not None:
            turns.append(Turn(**{**row, "img_urls": tuple(row.get("img_urls") or ())}))
    return str(raw.get("date_time") or ""), turns


def _extend_chunks(ws: Workspace, namespace: str, conversation: Conversation, ctx: ChunkSettings) -> None:
    """Rechunk the sessions `conversation` holds, the namespace's last ones. Chunk ids are numbered in
    conversation order (recollect.memory.chunks), so the chunks of earlier sessions keep theirs and these
    continue after them; a chunk whose text did not change is not embedded again."""
    index = chunk_index(ws, namespace, ctx)
    first = min(s.index for s in conversation.sessions)
    tail = index.collection.get(where={"session": {"$gte": first}}, include=[])["ids"]
    start = index.collection.count() - len(tail)
    units = [replace(u, id=f"{conversation.id}:c{start + i}")
             for i, u in enumerate(chunk_turns(conversation, ctx.memr3_chunk_tokens), start=1)]
    index.delete(sorted(set(tail) - {u.id for u in units}))
    index.upsert(units)


def append_chat_turns(ws: Workspace, namespace: str, turns: list[ChatTurn], *, thread: str,
                      ctx: ChunkSettings) -> Appended:
    """Store `turns` (a chat's, in order) in `namespace`, skipping those already remembered; see the module
    docstring for sessions and ids. MemR3's chunks are extended too when the namespace has them (or is new);
    the caller queues every other build."""
    validate_namespace(namespace)
    with namespace_lock(ws, namespace):
        info = ws.namespace_info(namespace)
        embedder = embedder_name(ws.embeddings)
        if info is not None and info.embedder != embedder:
            raise NamespaceError(f"namespace {namespace!r} was built with embedder {info.embedder!r}, not {embedder!r}")
        fresh = _unseen(ws, namespace, turns)
        out = Appended(skipped=len(turns) - len(fresh), created=info is None)
        if not fresh:
            return out
        known = set(info.sessions) if info else set()
        last = max(known, default=0)
        tail = ws.docs.get(namespace, TAIL_KIND, TAIL_KEY) or {}
        new_turns: dict[int, list[Turn]] = {}
        keys: dict[str, str] = {}
        for chat in fresh:
            day = chat.at.date().isoformat()
            if tail.get("session") == last and tail.get("thread") == thread and tail.get("day") == day:
                session, position = last, int(tail["next"])
            else:
                last = session = last + 1
                position = 1
            while ws.docs.get(namespace, "turn", f"D{session}:{position}") is not None:
                position += 1  # an id a dialogue file already gave some turn: never overwrite it
            tid = f"D{session}:{position}"
            new_turns.setdefault(session, []).append(Turn(id=tid, speaker=chat.speaker, text=chat.text,
                                                          session=session, index=position,
                                                          date_time=locomo_time(chat.at)))
            keys[chat.key] = tid
            tail = {"session": session, "thread": thread, "day": day, "next": position + 1}
        sessions = []
        for index, added in sorted(new_turns.items()):
            date_time, earlier = _stored_session(ws, namespace, index) if index in known else ("", [])
            date_time = date_time or added[0].date_time
            sessions.append(Session(index, date_time, parse_locomo_datetime(date_time), (*earlier, *added)))
        speakers = list(dict.fromkeys([*(info.speakers if info else []), *(t.speaker for t in fresh)]))
        conversation = Conversation(id=info.conversation_id if info else CHAT_CONVERSATION,
                                    speakers=tuple(speakers), sessions=tuple(sessions))
        built = dict(info.built) if info else {}
        with ws.docs.transaction():  # one write: turns, sessions, the namespace's record and the message keys
            ws.store_turns(namespace, conversation, embed=False)  # the turn vectors: MGRetrieval's, in the background
            ws.save_namespace(NamespaceInfo(name=namespace, conversation_id=conversation.id, embedder=embedder,
                                            speakers=speakers, sessions=sorted(known | set(new_turns)),
                                            built=built))
            ws.docs.put_many(namespace, KEY_KIND, keys)
            ws.docs.put(namespace, TAIL_KIND, TAIL_KEY, tail)
        out.added, out.sessions = list(keys.values()), sorted(new_turns)
        if info is None or CHUNKS in built:
            try:
                _extend_chunks(ws, namespace, conversation, ctx)
                ws.mark_built(namespace, CHUNKS, {"sessions": len(known | set(new_turns)), "via": "remember"})
                out.chunks_extended = True
            except Exception as exc:  # the background build retries it; the turns are stored
                out.chunk_error = f"{type(exc).__name__}: {exc}"[:300]
        return out
