"""HyMem's two-granularity memory (README.md in this folder, "What ingestion builds").

- Level-2: one unit per session (`S<n>`): a date header, then one `[<dia_id>] <speaker>: <text>` line
  per turn. Stored with its ordered turn ids in the doc store (kind `hymem_session`).
- Level-1: key-information summaries (`S<n>.<k>`) written by ONE LLM call per session. Each keeps the
  turn ids it came from (our addition: turn-level supports and evidence recall). They are embedded in
  the Chroma collection `hymem_summaries` and stored as docs (kind `hymem_summary`) with their links.

Density (our addition, `hymem_turns_per_summary`; 0 = the spec): a session of n turns needs at
least ceil(n / turns_per_summary) items; a sparser reply is retried once with that instruction, and
if the retry is still sparse its items are kept (a valid summary, only coarser) and noted in the
report. Turns that no item links to are then added as their own line (the spec's per-turn fallback,
for those turns only): the local model tends to summarise the start of a long session and stop, and
an unlinked turn would otherwise be reachable by no Level-1 search. One item per session would make
light show everything and deep selection choose among sessions.

Link cap (our addition, `hymem_max_turns_per_item`; 0 = the spec): an item keeps at most that many of
the turns it lists, the ones most similar to its text, so a one-line gist that lists every turn of the
session does not mark them all as summarised; the turns it drops get turn lines like any unlinked turn.

Idempotent and incremental: a session whose content hash (session text, prompt-template hash, model,
temperature, density, link cap) matches its stored doc is skipped with no LLM call and no embedding,
unless it fell back to per-turn lines last time (then it is summarised again); otherwise the LLM reply
is looked up in the content-hash cache first (`recollect.llm.cache.cached_structured_call`). Each
session's docs are written in one transaction, and the session doc (the completion marker) is part of
it, so a crash in the middle leaves the session unfinished and the next run redoes only that session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.messages import HumanMessage

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.summaries import SummaryItem, SummaryReply, bounded_reply, dense_reply, min_items
from recollect.llm.cache import LLMCache, cache_key, cached_structured_call
from recollect.llm.models import get_chat_model, model_name
from recollect.llm.structured import extract_json
from recollect.memory.vectors import Unit, VectorIndex
from recollect.memory.workspace import Workspace
from recollect.prompts import prompt_hash, render_prompt
from recollect.settings import get_settings

METHOD = "hymem"
SUMMARY_KIND = "hymem_summaries"  # the Chroma collection kind
SESSION_DOC = "hymem_session"
SUMMARY_DOC = "hymem_summaries"  # one doc per session: its list of summaries
NEAREST_TURNS = 2  # an item with no valid turn id is linked to this many most similar turns
SUMMARISE_MAX_TOKENS = 1024


# ----------------------------------------------------------------------------------------- Level-2


def turn_line(turn: Turn) -> str:
    return f"[{turn.id}] {turn.speaker}: {turn.full_text}"


def session_id(session: Session) -> str:
    return f"S{session.index}"


def session_text(session: Session) -> str:
    """The Level-2 text: a date header, then one line per turn with its id."""
    header = f"Session {session_id(session)}, {session.date_time or 'date unknown'}"
    return "\n".join([header, *(turn_line(t) for t in session.turns)])


def date_meta(session: Session) -> dict[str, Any]:
    meta: dict[str, Any] = {"date": session.date or session.date_time or "unknown date"}
    if session.parsed is not None:
        meta.update(year=session.parsed.year, month=session.parsed.month, day=session.parsed.day)
    return meta


# ----------------------------------------------------------------------------------------- validation


def _nearest_turns(ws: Workspace, text: str, turns: tuple[Turn, ...], k: int = NEAREST_TURNS) -> list[str]:
    """The k turns of the session most similar to `text`, in conversation order."""
    if not turns:
        return []
    vecs: npt.NDArray[np.floating[Any]] = np.asarray(ws.embeddings.embed_documents([turn_line(t) for t in turns]),
                                                   dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms == 0, 1.0, norms)
    q = np.asarray(ws.embeddings.embed_query(text), dtype=np.float32)
    scores = vecs @ (q / (float(np.linalg.norm(q)) or 1.0))
    best = sorted(np.argsort(-scores, kind="stable")[:k].tolist())
    return [turns[i].id for i in best]


def link_items(
    ws: Workspace, session: Session, items: list[dict[str, Any]], max_turns: int = 0
) -> tuple[list[dict[str, Any]], list[str], set[str]]:
    """Drop empty texts and foreign turn ids; link id-less items to their nearest turns; an item listing
    more than `max_turns` turns (0 = no cap) keeps the `max_turns` of them most similar to its text.

    Returns the cleaned items, notes for the build report and the turn ids the cap unlinked.
    """
    matcher = TurnIdMatcher(t.id for t in session.turns)
    by_id = {t.id: t for t in session.turns}
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    released: set[str] = set()
    for item in items:
        text = str(item.get("text") or "").strip()
        if not text:
            continue
        ids = matcher.resolve(item.get("turn_ids") or [])
        dropped = [i for i in item.get("turn_ids") or [] if not matcher.resolve([i])]
        if dropped:
            notes.append(f"{session_id(session)}: dropped turn ids outside the session {dropped}")
        if not ids:
            ids = _nearest_turns(ws, text, session.turns)
            notes.append(f"{session_id(session)}: item {len(out)} linked to nearest turns {ids}")
        elif 0 < max_turns < len(ids):
            kept = _nearest_turns(ws, text, tuple(by_id[i] for i in ids), k=max_turns)
            released.update(set(ids) - set(kept))
            notes.append(f"{session_id(session)}: item {len(out)} listed {len(ids)} turns, kept the {max_turns} "
                         "most similar to its text")
            ids = kept
        out.append({"text": text, "turn_ids": ids})
    return out, notes, released


def fallback_items(session: Session) -> list[dict[str, Any]]:
    """One summary per turn, equal to the turn line, linked to that turn."""
    return [{"text": turn_line(t), "turn_ids": [t.id]} for t in session.turns]


def cover_unlinked(
    session: Session, items: list[dict[str, Any]], among: set[str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The items plus one turn-line item for each turn (of `among`; None = any) no item links to;
    returns (items, those turn ids)."""
    linked = {t for item in items for t in item["turn_ids"]}
    missing = [t for t in session.turns if t.id not in linked and (among is None or t.id in among)]
    return items + [{"text": turn_line(t), "turn_ids": [t.id]} for t in missing], [t.id for t in missing]


# ----------------------------------------------------------------------------------------- build


def summary_index(ws: Workspace, namespace: str) -> VectorIndex:
    return ws.index(SUMMARY_KIND, namespace)


def _session_hash(text: str, model: str, temperature: float, needed: int, max_turns: int, bounded: bool) -> str:
    parts: list[Any] = [text, prompt_hash(METHOD, "summarise"), model, f"{temperature:g}", needed, max_turns]
    payload = json.dumps(parts + ["bounded"] if bounded else parts)  # off: the hash it had before the setting
    return hashlib.sha256(payload.encode()).hexdigest()


def _sparse_items(raw: str) -> list[dict[str, Any]]:
    """The items of a reply that failed only the density check (valid otherwise), else []."""
    try:
        return [i.model_dump() for i in SummaryReply.model_validate(extract_json(raw)).items]
    except ValueError:  # pydantic's ValidationError is a ValueError too
        return []


def _items(reply: SummaryReply) -> list[dict[str, Any]]:
    return [i.model_dump() for i in reply.items]


def _stored_reply(schema: type[SummaryReply]) -> Callable[[dict[str, Any]], SummaryReply]:
    """Reads HyMem's cache entries, `{"items": [...]}`: the items exactly as the ingest that wrote them used.

    They are not validated again, and the shared helper takes an instance of `schema` as it is: a reply
    kept after a failed density retry has fewer items than `schema` allows, and cleaning cleaned turn
    ids again is not always a no-op (`clean_id`), so validating would change or reject what was cached.
    """

    def read(hit: dict[str, Any]) -> SummaryReply:
        items = [SummaryItem.model_construct(text=i.get("text", ""), turn_ids=i.get("turn_ids", []))
                 for i in hit.get("items") or []]
        return schema.model_construct(items=items)

    return read


def _summarise(ws: Workspace, namespace: str, session: Session, ctx: HyMemContext, text: str, report: Any,
               cache: LLMCache, model: Any, name: str,
               temperature: float) -> tuple[list[dict[str, Any]], bool, str]:
    """The session's raw items (cached or from one LLM call); returns (items, fallback, error)."""
    needed = min_items(len(session.turns), ctx)
    payload: dict[str, Any] = {"session": text, "min_items": needed}
    if ctx.hymem_bounded_summaries:
        payload["bounded"] = ctx.hymem_max_turns_per_item  # a reply to the unbounded schema is not reused
    key = cache_key(namespace, METHOD, "summarise", name, temperature, payload)
    prompt = render_prompt(METHOD, "summarise", session=text, n_turns=len(session.turns), min_items=needed)
    schema = (bounded_reply(tuple(t.id for t in session.turns), needed, ctx.hymem_max_turns_per_item)
              if ctx.hymem_bounded_summaries else dense_reply(len(session.turns), needed))
    got = cached_structured_call(cache, key, model, [HumanMessage(content=prompt)], schema,
                                 node="hymem_summarise", method=ctx.structured_method,
                                 max_tokens=SUMMARISE_MAX_TOKENS, report=report, legacy=_stored_reply(schema))
    if got.cached:
        assert got.value is not None  # a hit always carries its reply
        return _items(got.value), False, ""
    if got.value is not None:
        items = _items(got.value)
    else:
        assert got.result is not None  # a miss always carries the model's result
        items = _sparse_items(got.result.raw)  # still too few after the retry: coarser, but a real summary
        if not items:
            return [], True, got.error or "invalid reply"
        report.fallbacks.append(f"{session_id(session)}: {len(items)} item(s) after the density retry "
                                f"(wanted {needed}); kept")
    # Only usable replies are cached; a session that fell back is summarised again on the next ingest.
    # HyMem keeps its own entry (the items, replacing the helper's copy of a valid reply), read back
    # as is by `_stored_reply`, so a re-ingest uses exactly the items this one did.
    cache.put(key, {"items": items})
    return items, False, ""


def build(ws: Workspace, namespace: str, conversation: Conversation, ctx: HyMemContext, progress: Any) -> Any:
    from recollect.memory.build import BuildReport

    report = BuildReport(METHOD, sessions=len(conversation.sessions))
    index = summary_index(ws, namespace)
    cache = LLMCache(ws.docs)
    model = get_chat_model(ctx)
    name = model_name(model)
    temperature = float(getattr(model, "temperature", None) or get_settings().llm_temperature or 0.0)

    for session in progress(list(conversation.sessions), "hymem summaries"):
        sid = session_id(session)
        if not session.turns:
            continue  # nothing to summarise; no call
        text = session_text(session)
        digest = _session_hash(text, name, temperature, min_items(len(session.turns), ctx),
                               ctx.hymem_max_turns_per_item, ctx.hymem_bounded_summaries)
        old = ws.docs.get(namespace, SESSION_DOC, sid)
        ids = (old or {}).get("summary_ids") or []
        if old and old.get("hash") == digest and not old.get("fallback") and ids and len(index.get(ids)) == len(ids):
            continue  # unchanged, summarised and complete: zero calls, zero embeddings

        raw, failed, error = _summarise(ws, namespace, session, ctx, text, report, cache, model, name, temperature)
        items, notes, released = (link_items(ws, session, raw, ctx.hymem_max_turns_per_item) if not failed
                                  else ([], [], set()))
        if not items:
            failed, error = True, error or "no usable summary item"
            items = fallback_items(session)
        if failed:
            report.fallbacks.append(f"{sid}: summary fallback (one summary per turn): {error[:200]}")
        elif ctx.hymem_turns_per_summary > 0 or released:
            # With the density check off, only the turns the link cap took away get turn lines.
            items, unlinked = cover_unlinked(session, items, None if ctx.hymem_turns_per_summary > 0 else released)
            if unlinked:
                notes.append(f"{sid}: {len(unlinked)} turn(s) no summary links to, added as turn lines")
        report.fallbacks.extend(notes)

        meta = date_meta(session)
        units = [
            Unit(id=f"{sid}.{k}", text=item["text"], turn_ids=item["turn_ids"],
                 metadata={"session": sid, "order": session.index * 100000 + k, **meta})
            for k, item in enumerate(items)
        ]
        # A changed session may yield fewer items, and a run stopped between the upsert below and the
        # session doc left vectors no doc lists: remove every vector of the session that is not a unit now.
        listed = {*((old or {}).get("summary_ids") or []),
                  *index.collection.get(where={"session": sid}, include=[])["ids"]}
        index.delete(sorted(listed - {u.id for u in units}))
        report.embedded += index.upsert(units)
        with ws.docs.transaction():
            # One doc per session holds its summaries, so replacing it drops a stale tail too.
            ws.docs.put(namespace, SUMMARY_DOC, sid, [
                {"id": u.id, "text": u.text, "turn_ids": u.turn_ids, **u.metadata} for u in units
            ])
            ws.docs.put(namespace, SESSION_DOC, sid, {
                "id": sid, "index": session.index, "date_time": session.date_time, **meta,
                "text": text, "turn_ids": [t.id for t in session.turns],
                "summary_ids": [u.id for u in units], "hash": digest, "fallback": bool(failed),
            })
    return report


# ----------------------------------------------------------------------------------------- reading


def load_sessions(ws: Workspace, namespace: str) -> dict[str, dict[str, Any]]:
    """Level-2 session docs by id, in session order."""
    docs = ws.docs.items(namespace, SESSION_DOC)
    return dict(sorted(docs.items(), key=lambda kv: kv[1].get("index", 0)))


def load_summaries(ws: Workspace, namespace: str) -> dict[str, dict[str, Any]]:
    """Level-1 summary docs by id, in corpus order (session order, then item order)."""
    rows = [s for per_session in ws.docs.items(namespace, SUMMARY_DOC).values() for s in per_session]
    return {s["id"]: s for s in sorted(rows, key=lambda s: s.get("order", 0))}


def turn_ids_in_memory(ws: Workspace, namespace: str, ctx: Any = None) -> set[str]:
    """Turns reachable through the memory: those of every session at least one level-1 summary links
    to (deep retrieval reads a session's whole level-2 text once a summary of it is selected)."""
    linked = {s.get("session") for s in load_summaries(ws, namespace).values()}
    return {t for sid, doc in load_sessions(ws, namespace).items() if sid in linked for t in doc.get("turn_ids") or []}
