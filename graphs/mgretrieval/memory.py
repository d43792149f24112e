"""MGRetrieval's ingestion: it builds the keyword vocabulary V and the keyword → memories map Φ.

Paper §3.1 (eqs. 1–6), built per session instead of per memory (README.md in this folder, "What
ingestion builds"):

1. **Extraction (p_s1)**, one call per session: K_i for every turn (the memory unit is one turn).
2. **Deterministic pre-match**: a normalised keyword already in V is matched with no call.
3. **Matching (p_s2)**, at most one call per session: each remaining keyword that has an
   embedding shortlist (entries of V with cosine ≥ `mg_match_min_sim`) may be mapped to one
   shortlist entry; keywords without a shortlist are new with no call.
4. **Update** (eqs. 3–6): T_i = K_i with matched keywords replaced by their entry; unmatched
   keywords join V; Φ(v) gains the turn for every v in T_i.

Both calls answer in `MGRetrievalContext.mg_ingest_format`: "compact" (numbers and short strings,
about half the generated tokens) or "json" (the spec's keyed objects); either shape is parsed in either
mode and goes through the same validation, so equivalent replies build the same V, Φ and T_i.

Sessions are processed strictly in order because V after session s depends only on sessions 1..s.
Each session's result is written in one transaction (a per-session record, the materialised
vocabulary and the per-turn T_i), so a crash leaves a consistent prefix and the next run goes on
from there. Every valid LLM reply is cached by content hash, so re-ingesting makes no call; a changed
session, or one built while a call failed, triggers a replay from the first such session (the failed
call is asked again), which is free up to that point.
Original turns are never rewritten: the structures only point at turn ids.

This module is the registered entry (`build`) and the chain of session hashes that decides what is
still valid; the step per session is `extraction.VocabularyBuilder`, the stored structures are in
`vocabulary`, the reply schemas in `ingest_replies`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from recollect.dialogue.models import Conversation, Session
from recollect.graphs.mgretrieval.extraction import PROMPTS, VocabularyBuilder
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.vocabulary import (
    DOC_SESSION,
    DOC_STATE,
    DOC_TURN,
    METHOD,
    STATE_KEY,
    KeywordVocabulary,
)
from recollect.llm.models import model_name
from recollect.memory.embeddings import embedder_name
from recollect.memory.workspace import Workspace
from recollect.prompts import prompt_hash

# The registry imports `build`; DOC_TURN stays importable here for the cost benchmark's tests.
__all__ = ["DOC_TURN", "build", "chain_hashes", "settings_fingerprint"]


def settings_fingerprint(ctx: MGRetrievalContext, model: Any, embedder: str) -> str:
    """Everything besides the session text that can change V and Φ: part of each chain hash."""
    parts = {
        "k": ctx.mg_keywords_per_memory,
        "shortlist": ctx.mg_match_shortlist,
        "min_sim": ctx.mg_match_min_sim,
        "surface": ctx.mg_keep_surface_forms,
        "model": model_name(model),
        "embedder": embedder,
        "prompts": [prompt_hash(METHOD, name) for name in PROMPTS[ctx.mg_ingest_format]],
    }
    if ctx.mg_ingest_format != "json":
        # The json format keeps the fingerprint it had before the setting existed, so stores built
        # then stay valid under it; any other format is part of the chain (switching replays).
        parts["format"] = ctx.mg_ingest_format
    if ctx.mg_keyword_grounding:  # off leaves the fingerprint as it was before the setting existed
        parts["grounding"] = ctx.mg_grounded_minimum
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def chain_hashes(sessions: Sequence[Session], fingerprint: str) -> list[str]:
    """One hash per session covering it and everything before it, so the first changed one shows."""
    out, prev = [], fingerprint
    for s in sessions:
        prev = hashlib.sha256(f"{prev}|{s.index}|{s.content_hash()}".encode()).hexdigest()[:32]
        out.append(prev)
    return out


def build(ws: Workspace, namespace: str, conversation: Conversation, ctx: MGRetrievalContext,
          progress: Any) -> Any:
    """The registered MGRetrieval builder (see `recollect.graphs.registry.BUILDERS`)."""
    from recollect.memory.build import BuildReport

    start = time.monotonic()
    report = BuildReport(METHOD)
    builder = VocabularyBuilder(ws, namespace, ctx, report)
    sessions = sorted(conversation.sessions, key=lambda s: s.index)
    chains = chain_hashes(sessions, settings_fingerprint(ctx, builder.model, embedder_name(ws.embeddings)))

    stored = KeywordVocabulary.load(ws, namespace)
    records = sorted(ws.docs.items(namespace, DOC_SESSION).values(), key=lambda r: r["position"])
    unchanged = 0
    while unchanged < min(len(stored.chain), len(chains)) and stored.chain[unchanged] == chains[unchanged]:
        unchanged += 1
    # A session built while a call failed holds fallback keywords: it is built again with the failed
    # calls asked again, and so is every later one, since V after session s depends on sessions 1..s.
    keep = min([unchanged, *(r["position"] for r in records if r["position"] < unchanged and failed_call(r))])
    if keep == len(stored.chain):
        builder.vocab = stored  # the common case: everything stored is still valid, extend it
    else:
        # A stored session changed (or the settings did, or it fell back): rebuild V/Φ for the valid
        # prefix from the per-session records and replay the rest; the LLM cache makes valid replies free.
        valid = [r for r in records if r["position"] < keep and r["chain"] == chains[r["position"]]]
        builder.vocab = KeywordVocabulary.replay(valid)
        with ws.docs.transaction():
            for r in records:
                if r not in valid:
                    ws.docs.put(namespace, DOC_SESSION, str(r["index"]),
                                {**r, "position": 1 << 30, "chain": "stale"})
            ws.docs.put(namespace, DOC_STATE, STATE_KEY, builder.vocab.as_doc())
        if keep == unchanged < len(stored.chain):
            report.fallbacks.append(f"replayed from session position {keep} (stored sessions changed)")

    todo = list(enumerate(sessions))[keep:]
    for position, session in progress(todo, "mgretrieval sessions"):
        record = builder.process(session, chains[position], position)
        builder.save(record, session)
        report.sessions += 1
        if record["fallback_turns"]:
            turns = ", ".join(record["fallback_turns"])
            report.fallbacks.append(f"session {session.index}: fallback keywords for {turns}")
        for note in record["notes"]:
            if note.get("fallback"):
                report.fallbacks.append(f"session {session.index}: {note['call']} failed, safe fallback used")
    report.embedded = builder.sync_index()
    report.seconds = round(time.monotonic() - start, 3)
    return report


def failed_call(record: dict[str, Any]) -> bool:
    """Whether a session record was built while one of its calls failed: its notes say so, or (a record
    written before an empty reply counted as failed) every one of its turns holds fallback keywords."""
    if any(note.get("fallback") for note in record.get("notes") or []):
        return True
    turns = [tid for tid, _ in record.get("keywords") or []]
    return bool(turns) and set(turns) <= set(record.get("fallback_turns") or [])


def turn_ids_in_memory(ws: Workspace, namespace: str, ctx: Any = None) -> set[str]:
    """Turns some vocabulary keyword maps to (Φ): what a keyword group can ever retrieve."""
    return {t for ids in KeywordVocabulary.load(ws, namespace).phi.values() for t in ids}
