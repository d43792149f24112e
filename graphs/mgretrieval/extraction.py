"""One ingestion step of MGRetrieval, per session: extraction (p_s1) → pre-match → matching (p_s2) →
update of V and Φ (paper eqs. 1–6; README.md in this folder, "What ingestion builds").

`VocabularyBuilder` runs the two aux-model calls (each cached by content hash through
`recollect.llm.cache.cached_structured_call`), splits a session that would overflow
`max_prompt_tokens` into several calls, and keeps V's embeddings in memory so that every shortlist
is computed against V as it stood before the session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from recollect.budget import pack_batches
from recollect.dialogue.models import Session, Turn
from recollect.graphs.mgretrieval.ingest_replies import (
    ExtractionReply,
    MatchReply,
    compact_extraction_model,
    compact_match_model,
    resolve_candidate,
    resolve_entry,
    resolve_turn,
)
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.vocabulary import (
    DOC_SESSION,
    DOC_STATE,
    DOC_TURN,
    FALLBACK_MAX,
    METHOD,
    STATE_KEY,
    VOCAB_KIND,
    KeywordVocabulary,
    clean_keywords,
    fallback_keywords,
    grounded_keywords,
    normalise_keyword,
    usable_keyword,
)
from recollect.llm.cache import LLMCache, cache_key, cached_structured_call
from recollect.llm.models import get_chat_model, model_name
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.memory.vectors import Unit, VectorIndex
from recollect.memory.workspace import Workspace
from recollect.prompts import load_prompt, render_prompt
from recollect.settings import get_settings

# Prompt templates of calls 1 and 2 per `MGRetrievalContext.mg_ingest_format`.
PROMPTS = {
    "json": ("extract_keywords", "match_vocabulary"),
    "compact": ("extract_keywords_compact", "match_vocabulary_compact"),
}


def render_turn_line(turn: Turn, number: int | None = None) -> str:
    """`[D1:3] Ann: text` (json format), or with the turn's number in its batch (compact format)."""
    return f"[{turn.id if number is None else number}] {turn.speaker}: {turn.full_text}"


def render_candidate_line(number: int, keyword: str, shortlist: Sequence[str], compact: bool) -> str:
    """`1. hiking -> hike | trail` (json format) or `1. hiking -> 1) hike, 2) trail` (compact: entries
    numbered)."""
    if compact:
        return f"{number}. {keyword} -> " + ", ".join(f"{j}) {e}" for j, e in enumerate(shortlist, 1))
    return f"{number}. {keyword} -> {' | '.join(shortlist)}"


def _session_date(session: Session) -> str:
    return session.date or session.date_time or "unknown date"


class VocabularyBuilder:
    """Runs p_s1 → pre-match → p_s2 → update for one session at a time, over a live vocabulary."""

    def __init__(self, ws: Workspace, namespace: str, ctx: MGRetrievalContext, report: Any) -> None:
        self.ws = ws
        self.namespace = namespace
        self.ctx = ctx
        self.report = report
        self.model = get_chat_model(ctx, role="aux")
        self.cache = LLMCache(ws.docs)
        self.temperature = get_settings().llm_temperature
        self.index: VectorIndex = ws.index(VOCAB_KIND, namespace)
        self.vocab = KeywordVocabulary()
        self.usage: dict[str, Any] = {}
        self._vectors: dict[str, np.ndarray] = {}

    # -- embeddings of V, kept in memory so shortlists see exactly V_{s-1}
    def _ensure_vectors(self, entries: Sequence[str]) -> None:
        missing = [e for e in entries if e not in self._vectors]
        if not missing:
            return
        stored: dict[str, Any] = {}
        try:
            got = self.index.collection.get(ids=missing, include=["embeddings"])
            stored = dict(zip(got["ids"], got["embeddings"], strict=False))
        except Exception:  # an old or partial collection: embedding again is always correct
            stored = {}
        todo = [e for e in missing if stored.get(e) is None]
        fresh = dict(zip(todo, self.ws.embeddings.embed_documents(todo), strict=False)) if todo else {}
        for e in missing:
            vec = np.asarray(stored[e] if stored.get(e) is not None else fresh[e], dtype=np.float32)
            n = float(np.linalg.norm(vec))
            self._vectors[e] = vec / n if n else vec

    def shortlists(self, keywords: Sequence[str]) -> dict[str, list[str]]:
        """Up to `mg_match_shortlist` entries of the current V with cosine ≥ `mg_match_min_sim`."""
        if not keywords or not self.vocab.entries or self.ctx.mg_match_shortlist <= 0:
            return {}
        entries = list(self.vocab.entries)
        self._ensure_vectors(entries)
        matrix = np.vstack([self._vectors[e] for e in entries])
        kw_vecs: npt.NDArray[np.floating[Any]] = np.asarray(self.ws.embeddings.embed_documents(list(keywords)),
                                                            dtype=np.float32)
        norms = np.linalg.norm(kw_vecs, axis=1, keepdims=True)
        kw_vecs = kw_vecs / np.where(norms == 0, 1, norms)
        sims = kw_vecs @ matrix.T
        out: dict[str, list[str]] = {}
        for row, kw in enumerate(keywords):
            order = np.argsort(-sims[row], kind="stable")  # ties keep V's insertion order
            picked = [entries[j] for j in order[: self.ctx.mg_match_shortlist]
                      if sims[row, j] >= self.ctx.mg_match_min_sim]
            if picked:
                out[kw] = picked
        return out

    @property
    def compact(self) -> bool:
        return self.ctx.mg_ingest_format == "compact"

    # -- LLM calls (cached)
    def _call(self, call: str, prompt_name: str, payload: Any, prompt: str, schema: type[BaseModel],
              max_tokens: int, check: Callable[[Any], str | None] | None = None,
              ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """One cached structured call: (the reply as a dict or None, the note for the session record).

        The key holds the prompt template's name and hash (so the two formats never share a reply)
        and the usage is counted under `mg_<call>` in both formats; the session record's `usage`
        counts the calls actually made, as the build report does.
        """
        key = cache_key(self.namespace, METHOD, prompt_name, model_name(self.model), self.temperature,
                        payload)
        res = cached_structured_call(self.cache, key, self.model, [HumanMessage(content=prompt)], schema,
                                     node=f"mg_{call}", method=self.ctx.structured_method,
                                     max_tokens=max_tokens, report=self.report, check=check)
        value = res.value.model_dump() if res.value is not None else None
        if res.result is None:  # answered from the cache: no call, no usage
            return value, {"cached": True}
        self.usage = merge_usage(self.usage, res.result.usage)
        return value, ({} if value is not None else res.result.failure_note())

    def _extraction_batches(self, session: Session) -> list[list[Turn]]:
        """One batch per session unless the session alone would overflow the prompt budget."""
        template = load_prompt(METHOD, PROMPTS[self.ctx.mg_ingest_format][0])
        budget = self.ctx.max_prompt_tokens - estimate_tokens(template) - 100

        def cost(turn: Turn, position: int) -> int:  # the compact prompt numbers turns in their batch
            return estimate_tokens(render_turn_line(turn, position if self.compact else None))

        return pack_batches(session.turns, budget, cost)

    def _batch_keywords(self, value: dict[str, Any], batch: Sequence[Turn]) -> dict[str, list[str]]:
        """K_i of the batch's turns that an extraction reply names with a usable keyword; unknown ids dropped."""
        found: dict[str, list[str]] = {}
        for item in value.get("turns", []):
            tid = resolve_turn(item.get("id"), batch, numbers_first=self.compact)
            if tid is not None and tid not in found:
                kws = clean_keywords(item.get("keywords") or [], self.ctx.mg_keywords_per_memory)
                if kws:
                    found[tid] = kws
        return found

    def extract(self, session: Session) -> tuple[dict[str, list[str]], list[str], list[dict[str, Any]]]:
        """K_i for every turn of the session; returns (keywords, fallback turn ids, notes)."""
        k = self.ctx.mg_keywords_per_memory
        found: dict[str, list[str]] = {}
        notes: list[dict[str, Any]] = []
        name = PROMPTS[self.ctx.mg_ingest_format][0]
        for batch in self._extraction_batches(session):
            lines = "\n".join(render_turn_line(t, i if self.compact else None)
                              for i, t in enumerate(batch, 1))
            prompt = render_prompt(METHOD, name, date=_session_date(session), turns=lines, max_keywords=k)
            payload: dict[str, Any] = {"date": _session_date(session), "turns": lines, "k": k}
            schema: type[BaseModel] = ExtractionReply
            if self.compact:
                payload["format"] = "compact"
                schema = compact_extraction_model(len(batch), k)
            # A reply that fits the schema but gives no turn of the batch a usable keyword (`[]`, blank
            # keywords, ids of no turn) is a failed reply: retried, never cached, and the session's record
            # notes the fallback, so the next ingest asks again instead of keeping fallback keywords.
            def usable(reply: BaseModel, batch: list[Turn] = batch) -> str | None:
                if self._batch_keywords(reply.model_dump(), batch):
                    return None
                return f"the reply gives no usable keyword for any turn: write 1 to {k} keywords for every turn"

            value, note = self._call("extract_keywords", name, payload, prompt, schema,
                                     max_tokens=60 + 8 * k * len(batch), check=usable)
            if note.get("fallback"):
                notes.append({"call": "extract_keywords", **note})
            for tid, batch_kws in self._batch_keywords(value or {}, batch).items():
                found.setdefault(tid, batch_kws)
        out: dict[str, list[str]] = {}
        fallback: list[str] = []
        ungrounded = 0
        for turn in session.turns:
            kws = found.get(turn.id)
            if kws and self.ctx.mg_keyword_grounding:
                kws, dropped = grounded_keywords(kws, turn, self.ctx.mg_grounded_minimum)
                ungrounded += dropped
            if not kws:
                kws = fallback_keywords(turn, min(FALLBACK_MAX, k))
                fallback.append(turn.id)
            # Our choice: the speaker's name is always a keyword, so "who said it" can intersect.
            speaker = normalise_keyword(turn.speaker)
            if usable_keyword(speaker) and speaker not in kws:
                kws = [*kws, speaker]
            out[turn.id] = kws
        if ungrounded:
            notes.append({"ungrounded_keywords_dropped": ungrounded})
        return out, fallback, notes

    def match(self, candidates: dict[str, list[str]]) -> tuple[dict[str, str | None], list[dict[str, Any]]]:
        """p_s2 over the candidates and their shortlists; entries outside a shortlist count as null."""
        if not candidates:
            return {}, []
        items = sorted(candidates.items())  # canonical order: the cache key must not depend on set order
        name = PROMPTS[self.ctx.mg_ingest_format][1]
        budget = self.ctx.max_prompt_tokens - estimate_tokens(load_prompt(METHOD, name)) - 100

        def cost(item: tuple[str, list[str]], position: int) -> int:
            kw, short = item
            if self.compact:  # the compact listing numbers the candidates and their entries
                return estimate_tokens(render_candidate_line(position, kw, short, compact=True))
            return estimate_tokens(kw + " " + " | ".join(short)) + 4

        batches = pack_batches(items, budget, cost)
        result: dict[str, str | None] = {kw: None for kw in candidates}
        notes: list[dict[str, Any]] = []
        for batch in batches:
            listing = "\n".join(render_candidate_line(i, kw, short, self.compact)
                                for i, (kw, short) in enumerate(batch, 1))
            prompt = render_prompt(METHOD, name, candidates=listing)
            payload: Any = [[kw, short] for kw, short in batch]
            schema: type[BaseModel] = MatchReply
            max_tokens = 40 + 20 * len(batch)
            if self.compact:
                payload = {"format": "compact", "candidates": payload}
                schema = compact_match_model(tuple(len(short) for _, short in batch))
                max_tokens = 30 + 8 * len(batch)  # `"12": 3, ` is about 6 tokens
            value, note = self._call("match_vocabulary", name, payload, prompt, schema, max_tokens=max_tokens)
            if note.get("fallback"):
                notes.append({"call": "match_vocabulary", **note})
            for m in (value or {}).get("matches", []):
                kw = resolve_candidate(m.get("keyword"), batch, candidates, numbers_first=self.compact)
                if kw is None:
                    continue  # names no candidate
                entry, why = resolve_entry(m.get("entry"), candidates[kw], numbers_first=self.compact)
                if entry and result.get(kw) is None:
                    result[kw] = entry
                elif why:
                    notes.append({"rejected_match": [kw, str(m.get("entry"))], "why": why})
        return result, notes

    def process(self, session: Session, chain: str, position: int) -> dict[str, Any]:
        """One session: extraction, pre-match, matching, update. Returns the session record."""
        self.usage = {}
        keywords, fallback, notes = self.extract(session)
        distinct = list(dict.fromkeys(kw for kws in keywords.values() for kw in kws))
        prematched = [kw for kw in distinct if kw in self.vocab]
        unseen = [kw for kw in distinct if kw not in self.vocab]
        shortlists = self.shortlists(unseen)
        matches, match_notes = self.match(shortlists)
        mapping = {kw: matches.get(kw) for kw in unseen}

        new_entries: list[str] = []
        terms: list[list[Any]] = []
        for turn in session.turns:
            t_i: list[str] = []
            for kw in keywords[turn.id]:
                entry = mapping.get(kw) if kw in mapping else None
                if entry:
                    t_i.append(entry)
                    if self.ctx.mg_keep_surface_forms:
                        t_i.append(kw)  # eq. 3 read literally: the surface form is an entry too
                else:
                    t_i.append(kw)
            t_i = list(dict.fromkeys(t_i))
            for v in t_i:
                if v not in self.vocab:
                    self.vocab.add_entry(v)
                    new_entries.append(v)
                self.vocab.index_turn(v, turn.id)
            terms.append([turn.id, t_i])
        self.vocab.chain.append(chain)
        self.vocab.sessions.append(session.index)
        self._ensure_vectors(new_entries)
        return {
            "index": session.index,
            "position": position,
            "chain": chain,
            "hash": session.content_hash(),
            "keywords": [[tid, keywords[tid]] for tid in keywords],
            "terms": terms,
            "new_entries": new_entries,
            "prematched": prematched,
            "matched": {k: v for k, v in mapping.items() if v},
            "shortlisted": len(shortlists),
            "fallback_turns": fallback,
            "notes": notes + match_notes,
            "usage": self.usage,
        }

    def save(self, record: dict[str, Any], session: Session) -> None:
        """One transaction per session: its record, the materialised V/Φ and every T_i."""
        kw = dict((tid, k) for tid, k in record["keywords"])
        with self.ws.docs.transaction():
            self.ws.docs.put(self.namespace, DOC_SESSION, str(session.index), record)
            self.ws.docs.put(self.namespace, DOC_STATE, STATE_KEY, self.vocab.as_doc())
            self.ws.docs.put_many(self.namespace, DOC_TURN, {
                tid: {"session": session.index, "keywords": kw[tid], "terms": t_i,
                      "fallback": tid in record["fallback_turns"]}
                for tid, t_i in record["terms"]
            })

    def sync_index(self) -> int:
        """Make the `mg_vocab` Chroma collection hold exactly V (idempotent; re-embeds nothing known)."""
        wanted = set(self.vocab.entries)
        stale = sorted({u.id for u in self.index.all()} - wanted)
        self.index.delete(stale)
        units = [Unit(id=e, text=e, turn_ids=[], metadata={"entry": e}) for e in self.vocab.entries]
        return self.index.upsert(units)
