"""MRAgent's read-side store: one namespace's Cue–Tag–Content graph as the question-time graph reads it.

`CueTagGraph` loads what `recollect.graphs.mragent.memory` persisted (events, cue index, topics, persona facts,
timeline) and answers id, cue and similarity look-ups; it is cached per namespace and build stamp.
It only reads: the stored layout is `layout.py`, written by `persist.py`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

from recollect.dialogue.models import Turn
from recollect.graphs.mragent.cues import cue_norm, cue_relation, cue_tokens
from recollect.graphs.mragent.layout import (
    EVENTS_KIND,
    K_CUE,
    K_EVENT,
    K_META,
    K_PERSONA,
    K_SESSION,
    K_TOPIC,
    turn_of,
    turn_shapes,
)
from recollect.memory.workspace import NamespaceError, Workspace


class CueTagGraph:
    """Read side of one namespace's Cue–Tag–Content graph (loaded from `ws.docs`, cached per build)."""

    def __init__(self, ws: Workspace, namespace: str) -> None:
        self.ws = ws
        self.namespace = namespace
        docs = ws.docs
        self.events: dict[str, dict[str, Any]] = docs.items(namespace, K_EVENT)
        self.cues: dict[str, dict[str, Any]] = docs.items(namespace, K_CUE)
        self.topics: dict[str, dict[str, Any]] = docs.items(namespace, K_TOPIC)
        self.persona: dict[str, dict[str, list[dict[str, str]]]] = docs.items(namespace, K_PERSONA)
        self.timeline: dict[str, list[str]] = docs.get(namespace, K_META, "timeline") or {}
        self.sessions: dict[str, dict[str, Any]] = docs.items(namespace, K_SESSION)
        self.turns: dict[str, Turn] = ws.turns(namespace)
        self.id_shapes = turn_shapes(self.turns)  # how this dialogue writes its turn ids (`layout.id_turn`)
        self._positions = {(t.session, t.index): tid for tid, t in self.turns.items()}
        self._numbered = _numbered_sessions(self.turns)
        self.by_origin: dict[str, list[str]] = {}
        for eid, ev in self.events.items():
            self.by_origin.setdefault(ev["origin"], []).append(eid)
        self.cue_sets = {norm: frozenset(entry.get("tokens") or norm.split("_")) for norm, entry in self.cues.items()}
        self._tag_norms = {norm: {cue_norm(t): t for t in entry["tags"]} for norm, entry in self.cues.items()}
        self._rank_cache: dict[tuple[str, str], dict[str, float]] = {}
        # every token of every cue: the words a question's lexical cue may take another form of
        self.vocabulary: frozenset[str] = frozenset().union(*self.cue_sets.values())

    # --- loading
    @classmethod
    def load(cls, ws: Workspace, namespace: str) -> CueTagGraph:
        """The namespace's graph; a namespace never ingested for MRAgent raises `NamespaceError`."""
        ws.require_namespace(namespace)
        version = ws.docs.get(namespace, K_META, "version")
        if not version or not version.get("events"):
            raise NamespaceError(
                f"namespace {namespace!r} has no MRAgent graph yet; "
                f"run `recollect ingest FILE --namespace {namespace} --methods mragent` first"
            )
        key = (str(ws.data_dir), namespace)
        with _LOCK:
            cached = _GRAPHS.get(key)
            if cached and cached[0] == version.get("stamp") and cached[1].ws is ws:
                return cached[1]
        graph = cls(ws, namespace)
        with _LOCK:
            _GRAPHS[key] = (version.get("stamp"), graph)
        return graph

    # --- ids
    def origin_of(self, ident: str) -> str | None:
        """Turn id for a turn or sentence id that exists in this namespace, else None."""
        tid = turn_of(ident, self.turns)
        if tid is None:
            return None
        if ident.strip() != tid and ident.strip() not in self.events:
            return None  # `<turn>-<n>` of a real turn, but no such sentence
        return tid

    def sentences_of(self, turn_id: str) -> list[str]:
        return list(self.by_origin.get(turn_id, []))

    def event_date(self, eid: str) -> str:
        return (self.events.get(eid) or {}).get("time", "")

    def turn_date(self, turn_id: str) -> str:
        ids = self.by_origin.get(turn_id) or []
        return self.events[ids[0]]["time"] if ids else ""

    def raw_line(self, turn_id: str, with_date: bool = True) -> str:
        """`D3:12: Speaker: raw text (YYYY-MM-DD)` — the raw turn as the agent sees it."""
        turn = self.turns[turn_id]
        dates = sorted({self.events[e]["time"] for e in self.by_origin.get(turn_id, []) if self.events[e]["time"]})
        when = f" ({', '.join(dates)})" if with_date and dates else ""
        return f"{turn_id}: {turn.speaker}: {turn.full_text}{when}"

    def adjacent(self, turn_id: str, window: int) -> list[str]:
        """Turns within `window` positions in the same session, excluding itself.

        In a session whose ids are one prefix and a number (LoCoMo's `D3:<n>`) positions are those
        numbers (the dia_id numbering: `D3:12` → `D3:11`, `D3:13`); otherwise the turns' indexes.
        """
        turn = self.turns.get(turn_id)
        if turn is None:
            return []
        m = _TRAILING_NUMBER.fullmatch(turn_id)
        if m and turn.session in self._numbered:
            prefix, k = m[1], int(m[2])
            near = [f"{prefix}{j}" for j in range(k - window, k + window + 1) if j != k]
        else:
            near = [self._positions.get((turn.session, j), "")
                    for j in range(turn.index - window, turn.index + window + 1) if j != turn.index]
        return [tid for tid in near if tid in self.turns]

    # --- cues
    def find_cues(self, text: str, jaccard: float, exact: bool = False) -> list[str]:
        """Graph cue norms matching `text` (equality only when `exact`)."""
        toks = cue_tokens(text)
        if exact:
            norm = "_".join(sorted(toks))
            return [norm] if norm in self.cues else []
        return [n for n, s in self.cue_sets.items() if cue_relation(toks, s, jaccard)]

    def cue_events(self, norm: str) -> list[str]:
        out: list[str] = []
        for ids in self.cues[norm]["tags"].values():
            out.extend(i for i in ids if i not in out)
        return out

    def tag_of(self, cue_norm_key: str, tag: str) -> str | None:
        tags = self.cues.get(cue_norm_key, {}).get("tags", {})
        if tag in tags:
            return tag
        return self._tag_norms.get(cue_norm_key, {}).get(cue_norm(tag))

    def match_question(self, cues: list[dict[str, Any]], jaccard: float) -> tuple[list[str], dict[str, int]]:
        """Relation matching (the seed's first step): (full matches, partial matches with their cue counts)."""
        hits: dict[str, int] = {}
        n = 0
        for qc in cues:
            forms = [qc.get("cue") or "", *(qc.get("alternatives") or [])]
            sets = [cue_tokens(f) for f in forms if cue_tokens(f)]
            if not sets:
                continue
            n += 1
            matched: set[str] = set()
            for norm, gset in self.cue_sets.items():
                if any(cue_relation(s, gset, jaccard) for s in sets):
                    matched.update(self.cue_events(norm))
            for eid in matched:
                hits[eid] = hits.get(eid, 0) + 1
        order = list(self.events)
        full = [e for e in order if n and hits.get(e) == n]
        partial = {e: hits[e] for e in order if e in hits and hits[e] < n}
        return full, partial

    # --- similarity
    def ranking(self, kind: str, question: str) -> dict[str, float]:
        """Cosine of every unit of `kind` (events or topics) to the question, cached per question."""
        key = (kind, question)
        if key not in self._rank_cache:
            index = self.ws.index(kind, self.namespace)
            units = index.query(question, index.count()) if question else []
            self._rank_cache[key] = {u.id: u.score for u in units}
        return self._rank_cache[key]

    def rank_events(self, ids: Iterable[str], question: str) -> list[str]:
        scores = self.ranking(EVENTS_KIND, question)
        ids = list(dict.fromkeys(ids))
        pos = {i: n for n, i in enumerate(ids)}
        return sorted(ids, key=lambda i: (-scores.get(i, -1.0), pos[i]))


_TRAILING_NUMBER = re.compile(r"(.*?)(\d+)")


def _numbered_sessions(turns: dict[str, Turn]) -> set[int]:
    """Sessions whose turn ids all share one prefix followed by a number (`D3:1`, `D3:2`, …)."""
    prefixes: dict[int, set[str | None]] = {}
    for tid, turn in turns.items():
        m = _TRAILING_NUMBER.fullmatch(tid)
        prefixes.setdefault(turn.session, set()).add(m[1] if m else None)
    return {s for s, found in prefixes.items() if len(found) == 1 and None not in found}


_GRAPHS: dict[tuple[str, str], tuple[Any, CueTagGraph]] = {}
_LOCK = threading.Lock()
