"""MRAgent's seven traversal tools and the masking they share (README.md in this folder, "Tools").

Each tool is a function `(args, ToolContext) -> ToolResult`; `tools.py` registers them. A result never
repeats the raw text of a turn already in `masks`: such turns are listed by id under `already_shown`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from recollect.graphs.mragent.cues import cue_norm, cue_tokens
from recollect.graphs.mragent.layout import TOPIC_ID, shaped_like_id
from recollect.graphs.mragent.tool_io import (
    EventContextArgs,
    EventIdArgs,
    PersonArgs,
    PersonAspectArgs,
    TagEventsArgs,
    ToolContext,
    ToolResult,
    TopicArgs,
    error_result,
)
from recollect.memory.embeddings import cosine_matrix

TAGS_PER_CUE = 10


def _events_listing(tc: ToolContext, event_ids: list[str], header: str) -> ToolResult:
    """Events one per origin, ranked by similarity to the question, capped, with masking applied."""
    cap = tc.cfg.mra_tool_event_cap
    ranked = tc.graph.rank_events(event_ids, tc.question)
    origins = list(dict.fromkeys(tc.graph.events[eid]["origin"] for eid in ranked))
    res = ToolResult(text="")
    lines: list[tuple[str, str | None]] = [(header, None)]
    _show_turns(tc, res, lines, origins, cap)
    return _finish(res, lines)


def _show_turns(tc: ToolContext, res: ToolResult, lines: list[tuple[str, str | None]], turn_ids: list[str],
                cap: int | None = None) -> None:
    """Return each raw turn not yet in the masks (remembered for the rest of the round); name the
    masked ones as already shown. Stops at the first unmasked turn once `cap` turns were returned."""
    for tid in turn_ids:
        if tid in tc.masks:
            res.already_shown.append(tid)
            continue
        if cap is not None and len(res.shown_turns) >= cap:
            break
        line = tc.graph.raw_line(tid)
        lines.append((line, tid))
        res.shown_turns.append(tid)
        res.evidence.append(line)
        tc.masks.add(tid)


def _finish(res: ToolResult, lines: list[tuple[str, str | None]]) -> ToolResult:
    if not res.shown_turns and len(lines) == 1 and not res.already_shown:
        lines.append(("(no events)", None))
    elif not res.shown_turns and res.already_shown:
        lines.append(("(no new events)", None))
    if res.already_shown:
        lines.append(("already_shown: " + ", ".join(res.already_shown), None))
    res.parts = list(lines)
    res.text = "\n".join(line for line, _ in lines)
    res.result_ids = [*res.shown_turns, *res.already_shown, *res.result_ids]
    res.visible_ids = list(dict.fromkeys([*res.visible_ids, *res.shown_turns, *res.already_shown]))
    return res


def _resolve_event(tc: ToolContext, ident: str) -> str | ToolResult:
    origin = tc.graph.origin_of(ident)
    if origin is None:
        hint = "an id like D3:12 (a turn) or D3:12-2 (a sentence) taken from the results shown"
        if not shaped_like_id(ident, tc.graph.id_shapes):
            return error_result(f"'{ident}' is not an event id; use {hint}")
        return error_result(f"unknown event id '{ident}'; use {hint}")
    return origin


def _resolve_person(tc: ToolContext, person: str) -> str | ToolResult:
    low = person.lower()
    names = list(tc.graph.persona)
    for name in names:
        if name.lower() == low:
            return name
    for name in names:  # "Maya" for "Maya Lopez" and the reverse
        if low in name.lower().split() or name.lower() in low.split():
            return name
    known = ", ".join(names) or "none"
    return error_result(f"no personal information for '{person}' (known people: {known})")


@lru_cache(maxsize=4096)
def _embed_cached(emb_id: int, text: str) -> tuple[float, ...]:
    return tuple(_EMB[emb_id].embed_query(text))


_EMB: dict[int, Any] = {}


def _rank_tags(tc: ToolContext, tags: list[str]) -> list[str]:
    """Tags by embedding similarity to the question (deterministic, no LLM call; README.md in this folder)."""
    emb = tc.graph.ws.embeddings
    _EMB[id(emb)] = emb
    vecs: npt.NDArray[np.floating[Any]] = np.asarray([_embed_cached(id(emb), t) for t in tags], dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms == 0, 1, norms)
    sims = cosine_matrix(list(_embed_cached(id(emb), tc.question)), vecs)
    order = sorted(range(len(tags)), key=lambda i: (-float(sims[i]), i))
    return [tags[i] for i in order]


def query_tag_events(args: TagEventsArgs, tc: ToolContext) -> ToolResult:
    g = tc.graph
    norms = g.find_cues(args.cue, tc.cfg.mra_jaccard, exact=True) or g.find_cues(args.cue, tc.cfg.mra_jaccard)
    if not norms:
        return error_result(f"cue '{args.cue}' is not in the memory graph; use a cue listed in the seed or by a tool")
    events: list[str] = []
    tags_seen: list[str] = []
    for norm in norms:
        tags_seen.extend(g.cues[norm]["tags"])
        tag = g.tag_of(norm, args.tag)
        if tag is not None:
            events.extend(e for e in g.cues[norm]["tags"][tag] if e not in events)
    if not events:
        # A small model often passes a second cue as the tag ("Maya", "dog"): when the "tag" is itself a
        # cue, the events carrying both cues answer what it asked for.
        other = g.find_cues(args.tag, tc.cfg.mra_jaccard, exact=True)
        if other:
            mine = {e for norm in norms for e in g.cue_events(norm)}
            both = [e for norm in other for e in g.cue_events(norm) if e in mine]
            if both:
                return _events_listing(tc, list(dict.fromkeys(both)),
                                       f"'{args.tag}' is a cue, not a tag of '{args.cue}': events with both cues:")
        tags = ", ".join(dict.fromkeys(tags_seen)) or "none"
        return error_result(f"cue '{args.cue}' has no tag '{args.tag}' (its tags: {tags})")
    return _events_listing(tc, events, f"events for cue '{args.cue}' via tag '{args.tag}':")


def query_conversation_time(args: EventIdArgs, tc: ToolContext) -> ToolResult:
    origin = _resolve_event(tc, args.event_id)
    if isinstance(origin, ToolResult):
        return origin
    g = tc.graph
    turn = g.turns[origin]
    sentences = [args.event_id] if args.event_id in g.events else g.sentences_of(origin)
    dates = sorted({g.event_date(e) for e in sentences if g.event_date(e)})
    text = f"{args.event_id}: session date-time {turn.date_time or 'unknown'}; event date {', '.join(dates) or 'unknown'}"
    return ToolResult(text=text, result_ids=[origin], visible_ids=[origin])


def query_event_keywords(args: EventIdArgs, tc: ToolContext) -> ToolResult:
    origin = _resolve_event(tc, args.event_id)
    if isinstance(origin, ToolResult):
        return origin
    g = tc.graph
    lines = [f"unseen cues of {origin} (cue -> tags):"]
    res = ToolResult(text="", result_ids=[origin], visible_ids=[origin])
    for eid in g.sentences_of(origin):
        parts = []
        for cue in g.events[eid].get("cues") or []:
            norm = cue_norm(cue)
            if not norm or norm in tc.seen_cues or norm in res.cues or norm not in g.cues:
                continue
            tags = list(g.cues[norm]["tags"])
            if len(tags) > tc.cfg.mra_tag_max:
                tags = _rank_tags(tc, tags)
            parts.append(f"{cue} -> [{', '.join(tags[:TAGS_PER_CUE])}]")
            res.cues.append(norm)
        if parts:
            lines.append(f"{eid}: " + "; ".join(parts))
    tc.seen_cues.update(res.cues)
    if len(lines) == 1:
        lines.append("(no unseen cues)")
    res.text = "\n".join(lines)
    res.parts = [(res.text, None)]
    return res


def query_event_context(args: EventContextArgs, tc: ToolContext) -> ToolResult:
    origin = _resolve_event(tc, args.event_id)
    if isinstance(origin, ToolResult):
        return origin
    res = ToolResult(text="")
    lines: list[tuple[str, str | None]] = [(f"turns around {origin} (window {args.window}):", None)]
    _show_turns(tc, res, lines, tc.graph.adjacent(origin, args.window))
    res.visible_ids.append(origin)
    return _finish(res, lines)


def query_personal_information(args: PersonArgs, tc: ToolContext) -> ToolResult:
    name = _resolve_person(tc, args.person)
    if isinstance(name, ToolResult):
        return name
    aspects = tc.graph.persona[name]
    listing = ", ".join(f"{a} ({len(f)})" for a, f in aspects.items()) or "none"
    return ToolResult(text=f"{name}: aspects {listing}", result_ids=[name])


def query_personal_aspect(args: PersonAspectArgs, tc: ToolContext) -> ToolResult:
    name = _resolve_person(tc, args.person)
    if isinstance(name, ToolResult):
        return name
    aspects = tc.graph.persona[name]
    want = cue_tokens(args.aspect)
    chosen = [a for a in aspects if cue_tokens(a) == want] or [
        a for a in aspects if want and (cue_tokens(a) <= want or want <= cue_tokens(a))
    ]
    if not chosen:
        return error_result(f"{name} has no aspect '{args.aspect}' (aspects: {', '.join(aspects) or 'none'})")
    lines = [f"{name} / {', '.join(chosen)}:"]
    origins: list[str] = []
    for a in chosen:
        for f in aspects[a]:
            lines.append(f"{f['origin']}: {f['fact']}")
            origins.append(f["origin"])
    origins = list(dict.fromkeys(origins))
    return ToolResult(text="\n".join(lines), result_ids=origins, visible_ids=origins)


def query_topic_events(args: TopicArgs, tc: ToolContext) -> ToolResult:
    g = tc.graph
    topic = g.topics.get(args.topic)
    if topic is None:
        if not TOPIC_ID.match(args.topic):
            return error_result(f"'{args.topic}' is not a topic id; use an id like D3:t2 from the seed topics")
        return error_result(f"unknown topic id '{args.topic}'")
    res = _events_listing(tc, list(topic["events"]), f"{args.topic}: {topic['text']}")
    res.visible_ids.insert(0, args.topic)
    return res
