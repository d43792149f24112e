"""MRAgent's Cue–Tag–Content graph: the builder (ingestion); the read side is recollect.graphs.mragent.store.

Per session, in order, each *window* (the whole session when it fits `mra_ingest_window_tokens`)
gets two LLM calls: call A rewrites the turns into sentences with a tag, topics, an absolute time
and personal facts; call B copies cues verbatim out of each rewritten sentence. Both replies are
validated against the window (invented ids are dropped and reported), every turn is guaranteed
at least one event, and each valid reply is cached by content hash, so a re-ingest makes no call. A
session that a failed call left partly built from fallbacks is stamped so, and built again (its
failed calls asked again) by the next ingest.

`mra_ingest_format` picks the reply format: `compact` (default: positional arrays, local numbers,
"" for the session date; about 40% fewer generated tokens for the same content), `compact_merged`
(compact, with the cues written by call A: one call per window) or `json` (the spec's keyed
objects, unchanged). All three feed the same validation and build the same structures.
`mra_ingest_sentences="turn"` (default, compact only): call A writes no sentences, only a row per turn
(tag, topics, date) plus topics and facts; each turn is one event whose sentence is "<speaker>: <text>".

Persisted per namespace in `ws.docs` (kinds prefixed `mra_`), one transaction per session:
events, cues (cue → tag → events), topics, persona facts, the timeline and a session stamp; plus the
Chroma collections `mragent_events` (rewritten sentences) and `mragent_topics`. See README.md in
this folder ("What ingestion builds").

Modules: `windows.py` (the windows), `formats.py` (reply schemas per format), `validation.py`
(reply validation), `persist.py` (writing and stamps), `layout.py` (kinds and ids), `cues.py`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from recollect.dialogue.models import Conversation, Session
from recollect.graphs.mragent.cues import FALLBACK_CUES, MAX_CUES
from recollect.graphs.mragent.formats import CueItem, CueReply, turn_facts_cap, turn_times_cap
from recollect.graphs.mragent.ingest_formats import completion_cap, ingest_format, lexical_cues
from recollect.graphs.mragent.layout import EVENTS_KIND, K_EVENT, K_SESSION, METHOD, TOPICS_KIND
from recollect.graphs.mragent.persist import (
    SessionMemory,
    indexes_current,
    needs_build,
    rebuild_indexes,
    save_session,
)
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.validation import apply_cues, empty_cues, empty_rewrite, validate_rewrite
from recollect.graphs.mragent.windows import render_turn_line, session_date, windows
from recollect.llm.cache import LLMCache, cache_key, cached_structured_call
from recollect.llm.models import get_chat_model, model_name
from recollect.memory.workspace import Workspace
from recollect.prompts import render_prompt


def _temperature(model: Any) -> float:
    t = getattr(model, "temperature", None)
    return float(t) if isinstance(t, int | float) else 0.0


def _build_session(namespace: str, session: Session, ctx: MRAgentContext, cache: LLMCache, report: Any) -> SessionMemory:
    """Calls A and B (or their cached replies) for every window of one session, validated."""
    from langchain_core.messages import HumanMessage

    model = get_chat_model(ctx)
    mname, temp = model_name(model), _temperature(model)
    fmt = ingest_format(ctx)
    sdate = session_date(session)
    built = SessionMemory()
    topic_next = 1
    for w_idx, window in enumerate(windows(session, ctx.mra_ingest_window_tokens), start=1):
        where = f"session {session.index} window {w_idx}"
        # Call A. The compact prompts number the turns by their index in the session (the reply names
        # a turn by that number); the json prompt shows the turn ids.
        turn_numbers = {str(t.index): t.id for t in window} if fmt.numbered else None
        turns_text = "\n".join(f"{t.index} | {t.speaker}: {t.full_text}" if fmt.numbered else render_turn_line(t)
                               for t in window)
        payload_a: dict[str, Any] = {"date_time": session.date_time, "session_date": sdate, "turns": turns_text}
        if fmt.numbered:
            payload_a["format"] = ctx.mra_ingest_format  # json keeps its keys, so its cache stays valid
        extra: dict[str, Any] = {}
        if fmt.turn_sentences:
            payload_a["sentences"] = "turn"  # (its prompt differs too) never a reply that wrote the sentences
            payload_a["bounded"] = 2  # the window-bounded rows without numbers or dates: no reply of before
            extra.update(max_facts=turn_facts_cap(len(window)), first=window[0].index)
            if fmt.derived_labels:
                payload_a["labels"] = "derived"  # rows of topic numbers only: never a reply with tags
            else:
                extra["max_times"] = turn_times_cap(len(window))
        msgs_a = [HumanMessage(content=render_prompt(METHOD, fmt.rewrite, date_time=session.date_time,
                                                     session_date=sdate or "unknown", turns=turns_text, **extra))]
        call_a = cached_structured_call(
            cache, cache_key(namespace, METHOD, fmt.rewrite, mname, temp, payload_a), model, msgs_a,
            fmt.rewrite_model(window[0].index, window[-1].index), node="mragent_rewrite",
            method=ctx.structured_method,
            max_tokens=completion_cap(fmt.rewrite_cap, len(window)), report=report,
            # a reply that fits the schema but names no turn would leave every turn a fallback sentence:
            # failed, so the session is stamped a fallback and built again by the next ingest
            check=partial(empty_rewrite, window=window, numbers=turn_numbers, from_turns=fmt.turn_sentences),
        )
        reply_a = call_a.value
        if reply_a is None:
            built.fallback = True
            report.fallbacks.append(f"{where}: rewrite failed ({(call_a.error or '')[:120]}); one raw sentence per turn")
        res = validate_rewrite(reply_a, window, sdate, topic_next, session.index, turn_numbers,
                               from_turns=fmt.turn_sentences, derived=fmt.derived_labels)
        report.fallbacks.extend(f"{where}: {n}" for n in res.notes)
        topic_next += len(res.topics)

        # Call B, or (compact_merged) the cues call A wrote, or (lexical) no call: every sentence then
        # takes its content words, all of them up to the spec's 30, through the same validation.
        fallback_limit = FALLBACK_CUES
        if fmt.merged and res.cues:
            reply_b: CueReply | None = CueReply(sentences=[CueItem(id=eid, cues=c) for eid, c in res.cues.items()])
            sentence_numbers = None
        elif lexical_cues(ctx):
            reply_b, sentence_numbers, fallback_limit = None, None, MAX_CUES
        else:
            if fmt.merged and reply_a is not None:
                report.fallbacks.append(f"{where}: the merged rewrite wrote no cues; cue extraction call made")
            sentence_numbers = {str(i): eid for i, eid in enumerate(res.events, start=1)} if fmt.numbered else None
            sent_lines = "\n".join(f"{i} | {ev['rewritten']}" if fmt.numbered else f"{eid} | {ev['rewritten']}"
                                   for i, (eid, ev) in enumerate(res.events.items(), start=1))
            msgs_b = [HumanMessage(content=render_prompt(METHOD, fmt.cues, sentences=sent_lines))]
            payload_b: dict[str, Any] = {"sentences": [[eid, ev["rewritten"]] for eid, ev in res.events.items()]}
            if fmt.numbered:
                payload_b["format"] = "compact"  # both compact formats send this same call B
            call_b = cached_structured_call(
                cache, cache_key(namespace, METHOD, fmt.cues, mname, temp, payload_b), model, msgs_b,
                fmt.cue_schema, node="mragent_keywords", method=ctx.structured_method,
                max_tokens=completion_cap(fmt.cue_cap, len(res.events)), report=report,
                check=partial(empty_cues, events=res.events, accept_turn_ids=ctx.mra_cues_accept_turn_ids,
                              numbers=sentence_numbers),
            )
            reply_b = call_b.value
            if reply_b is None:
                built.fallback = True
                report.fallbacks.append(f"{where}: cue extraction failed ({(call_b.error or '')[:120]}); token fallback")
        report.fallbacks.extend(f"{where}: {n}" for n in apply_cues(reply_b, res.events, ctx.mra_cues_accept_turn_ids,
                                                                     sentence_numbers, fallback_limit))
        built.events.update(res.events)
        built.topics.update(res.topics)
        built.facts.extend(res.facts)
    return built


def build(ws: Workspace, namespace: str, conversation: Conversation, ctx: MRAgentContext, progress: Any) -> Any:
    """Build or extend the namespace's Cue–Tag–Content graph (idempotent, incremental, crash-safe)."""
    from recollect.memory.build import BuildReport

    report = BuildReport(METHOD)
    cache = LLMCache(ws.docs)
    done = ws.docs.items(namespace, K_SESSION)
    todo = [s for s in conversation.sessions if needs_build(done.get(str(s.index)), s, ctx)]
    ev_index, tp_index = ws.index(EVENTS_KIND, namespace), ws.index(TOPICS_KIND, namespace)
    changed = False
    for session in progress(todo, "mragent"):
        built = _build_session(namespace, session, ctx, cache, report)
        old = done.get(str(session.index)) or {}
        report.embedded += save_session(ws, namespace, session, ctx, built, old, ev_index, tp_index)
        report.sessions += 1
        changed = True
        rebuild_indexes(ws, namespace)
    if not changed and done and not indexes_current(ws, namespace):
        rebuild_indexes(ws, namespace)  # a run stopped between saving its last session and this
    return report


def turn_ids_in_memory(ws: Workspace, namespace: str, ctx: Any = None) -> set[str]:
    """Turns some content node (event) of the cue–tag–content graph was extracted from."""
    return {str(ev.get("origin")) for ev in ws.docs.items(namespace, K_EVENT).values() if ev.get("origin")}
