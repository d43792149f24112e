"""MGRetrieval: memory-guided reflective retrieval over a keyword pyramid.

START → select_keywords → build_pyramid → retrieve_round ─┬─ a group with new memories → assess
                                                          └─ pyramid exhausted        → rewrite
assess ─┬─ sufficient, or iteration ≥ mg_max_rounds → rewrite
        └─ otherwise                                 → retrieve_round
rewrite → END

Our additions to the spec's rounds, each a `MGRetrievalContext` setting whose other value is the spec:
`mg_assess_grounding` (a "sufficient" answer must be found in the memories shown), `mg_dense_fill`
(a narrow group is topped up with the question's nearest unmasked turns), `mg_exhausted_fallback`
(rounds left after the pyramid are dense rounds), `mg_keep_critical_when_none` (a reply naming no
memory keeps H(r-1) ∪ R̃(r)) and `mg_rewrite_keep_draft` (the rewrite may not drop the answer).

`select_keywords` is one call to the auxiliary model (p_r1); `assess` (p_r2) and `rewrite` (p_r3)
use the main model; `build_pyramid` and `retrieve_round` are deterministic. Trace records of LLM
nodes carry `llm_role` ("aux" or "main") so costs can be reported separately. Budgets (keywords,
rounds, new memories per round, critical memories, prompt size) are enforced here, never by the
prompt. See specs/methods/mgretrieval.md and docs/mgretrieval.md.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator

from recollect.answer_rewrite import memory_line, memory_lines, rewrite_answer
from recollect.dialogue.models import Turn
from recollect.graphs.mgretrieval.memory import (
    METHOD,
    VOCAB_KIND,
    KeywordPyramid,
    KeywordVocabulary,
    normalise_keyword,
    question_ngrams,
)
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.state import MGRetrievalState
from recollect.llm.lenient import StrList, Text, as_str_list
from recollect.llm.models import get_chat_model, model_name
from recollect.llm.structured import call_structured
from recollect.llm.usage import estimate_tokens
from recollect.memory.embeddings import cosine_matrix
from recollect.memory.workspace import Workspace
from recollect.prompts import load_prompt, render_prompt
from recollect.state import InputState, OutputState
from recollect.steps import (
    NO_INFO,
    TURN_ID,
    grounded_in,
    grounded_supports,
    is_no_info,
    messages,
    wire_question_lifecycle,
    workspace,
)
from recollect.trace import emit

# Nodes that call the auxiliary model: their usage is reported apart from the main LLM's (the paper's
# Table 3 counts only the main LLM).
AUX_LLM_NODES = frozenset({"select_keywords"})
FALLBACK_SELECT = 2  # selection fallback without n-gram matches: the top-2 candidates by similarity


# --- reply schemas (lenient: the graph, not the schema, enforces the rules) -----------------------


class SelectReply(BaseModel):
    """p_r1: up to `depth` vocabulary keywords, most important first."""

    keywords: StrList = Field(default_factory=list)


class AssessReply(BaseModel):
    """p_r2: the answer a(r), the sufficiency flag b(r) and the critical memory ids H(r)."""

    answer: Text = ""
    sufficient: bool = False
    critical_ids: list[str] = Field(default_factory=list)

    @field_validator("sufficient", mode="before")
    @classmethod
    def _flag(cls, v: Any) -> Any:
        if isinstance(v, str):
            s = v.strip().lower()
            if s in ("true", "yes", "1", "sufficient"):
                return True
            if s in ("false", "no", "0", "insufficient", ""):
                return False
        return v

    @field_validator("critical_ids", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        if isinstance(v, str):  # "D1:2, D3:4" or "[D1:2]" → the ids it quotes
            return TURN_ID.findall(v) or as_str_list(v)
        return [str(x).strip().strip("[]") for x in as_str_list(v)]


# --- helpers ------------------------------------------------------------------------------------


def _turn_order(ws: Workspace, namespace: str) -> dict[str, int]:
    return {tid: i for i, tid in enumerate(ws.turns(namespace))}


def _session_dates(ws: Workspace, namespace: str) -> dict[str, str]:
    """Turn id → its session's day-precision date (the `(session date)` of each memory line)."""
    out: dict[str, str] = {}
    for s in ws.sessions(namespace):
        for t in s.turns:
            out[t.id] = s.date or s.date_time
    return out


def _memory(turn: Turn, date: str) -> dict[str, Any]:
    return {"id": turn.id, "text": f"{turn.speaker}: {turn.full_text}", "date": date}


def _similarities(ws: Workspace, namespace: str, question: str, ids: list[str]) -> dict[str, float]:
    """Cosine of each turn to the question, from the shared turn collection's stored vectors."""
    if not ids:
        return {}
    index = ws.index("turns", namespace)
    got = index.collection.get(ids=ids, include=["embeddings"])
    vecs = {i: v for i, v in zip(got["ids"], got["embeddings"], strict=False) if v is not None}
    missing = [i for i in ids if i not in vecs]
    if missing:  # should not happen (turns are embedded at ingest), but never fail for it
        turns = ws.turns(namespace)
        texts = [f"{turns[i].speaker}: {turns[i].full_text}" if i in turns else i for i in missing]
        vecs.update(zip(missing, ws.embeddings.embed_documents(texts), strict=False))
    matrix = np.asarray([vecs[i] for i in ids], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1, norms)
    sims = cosine_matrix(ws.embeddings.embed_query(question), matrix)
    return {i: float(s) for i, s in zip(ids, sims, strict=False)}


def _top_by_similarity(ws: Workspace, namespace: str, question: str, ids: list[str], n: int) -> list[str]:
    """The n ids most similar to the question; ties keep the given (turn) order."""
    if len(ids) <= n:
        return list(ids)
    sims = _similarities(ws, namespace, question, ids)
    ranked = sorted(range(len(ids)), key=lambda k: (-round(sims.get(ids[k], 0.0), 6), k))
    return [ids[k] for k in ranked[:n]]


def _dense_turns(ws: Workspace, namespace: str, question: str, exclude: set[str], n: int) -> list[str]:
    """The n turns nearest the question by embedding, none of them in `exclude` (in no set order).

    Exact cosine over the shared turn collection's stored vectors (the capping similarity), so ties
    go to the earlier turn and the result never depends on the vector index's approximate search.
    """
    if n <= 0:
        return []
    candidates = [t for t in ws.turns(namespace) if t not in exclude]  # conversation order
    return _top_by_similarity(ws, namespace, question, candidates, n)


# --- nodes --------------------------------------------------------------------------------------


def candidate_keywords(ws: Workspace, namespace: str, question: str, vocab: KeywordVocabulary, limit: int) -> tuple[list[str], list[str]]:
    """Up to `limit` entries: question n-grams found in V first, then the rest by cosine. Returns (all, ngram hits)."""
    grams = [g for g in question_ngrams(question) if g in vocab]
    out = grams[:limit]
    if len(out) < limit:
        index = ws.index(VOCAB_KIND, namespace)
        for unit in index.query(question, limit + len(out)):
            if unit.id in vocab and unit.id not in out:
                out.append(unit.id)
            if len(out) >= limit:
                break
    return out, [g for g in grams if g in out]


def select_keywords(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    ws.require_namespace(ns)
    question = state["question"]
    vocab = KeywordVocabulary.load(ws, ns)
    depth = max(0, ctx.mg_depth)
    if not vocab.entries or depth == 0:
        why = ("the keyword vocabulary is empty (was the namespace ingested with mgretrieval?)"
               if not vocab.entries else "mg_depth is 0")
        return {
            "mg_keywords": [], "query": "",
            "trace": emit("select_keywords", llm_role="aux", calls=0, keywords=[], note=f"{why}; no keyword selected"),
        }

    candidates, grams = candidate_keywords(ws, ns, question, vocab, max(1, ctx.mg_select_candidates))
    if not candidates:  # e.g. the mg_vocab collection is missing: re-ingesting re-syncs it
        return {
            "mg_keywords": [], "query": "",
            "trace": emit("select_keywords", llm_role="aux", calls=0, keywords=[],
                          note="no candidate keyword for this question (vocabulary index empty?); no keyword selected"),
        }
    numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(candidates, 1))
    user = render_prompt(METHOD, "select_keywords", question=question, candidates=numbered, depth=depth)
    model = get_chat_model(ctx, role="aux")
    res = call_structured(model, messages(None, user), SelectReply, node="select_keywords",
                          method=ctx.structured_method, max_tokens=80)

    allowed = set(candidates)
    chosen: list[str] = []
    invented: list[str] = []
    note: dict[str, Any] = {}
    if res.value is not None:
        for raw in res.value.keywords:
            kw = normalise_keyword(raw)
            if kw not in allowed:
                invented.append(raw)
            elif kw not in chosen:
                chosen.append(kw)
        replied = len(res.value.keywords)
        chosen = chosen[:depth]
        if not chosen and invented:
            note["why_fallback"] = "every keyword in the reply was outside the candidate list"
    else:
        replied = 0
        note = res.failure_note()
    if res.value is None or (not chosen and invented):
        chosen = (grams or candidates[:FALLBACK_SELECT])[:depth]
        note["fallback_keywords"] = "question n-grams found in the vocabulary" if grams else f"top {FALLBACK_SELECT} candidates by similarity"
    if not chosen:
        note["note"] = "no usable keyword for this question"
    return {
        "mg_keywords": chosen,
        "query": ", ".join(chosen),
        "usage": res.usage,
        "trace": emit(
            "select_keywords", llm_role="aux", model=model_name(model), n_vocabulary=len(vocab),
            n_candidates=len(candidates), ngram_hits=grams, keywords=chosen, n_replied=replied,
            dropped_not_candidates=invented, **note,
        ),
    }


def speaker_keywords(ws: Workspace, namespace: str) -> set[str]:
    """The speakers' names as vocabulary keywords (ingestion makes each turn's speaker a keyword)."""
    return {normalise_keyword(t.speaker) for t in ws.turns(namespace).values()} - {""}


def build_pyramid(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    keywords = list(state.get("mg_keywords") or [])
    vocab = KeywordVocabulary.load(ws, ns)
    order = _turn_order(ws, ns)
    phi = {k: [t for t in vocab.memories(k) if t in order] for k in keywords}  # never point at unknown turns
    groups = [g.as_dict() for g in KeywordPyramid.build(keywords, phi, order)]
    speakers = speaker_keywords(ws, ns)
    for g in groups:
        g["speaker_only"] = bool(g["keywords"]) and all(k in speakers for k in g["keywords"])
    if ctx.mg_speaker_only_groups == "last":  # stable: the other groups keep the paper's order
        groups = [g for g in groups if not g["speaker_only"]] + [g for g in groups if g["speaker_only"]]
    return {
        "mg_pyramid": groups,
        "mg_cursor": 0,
        "mg_exhausted": False,
        "trace": emit(
            "build_pyramid", keywords=keywords, n_groups=len(groups),
            pyramid=[f"L{g['level']} {' + '.join(g['keywords'])} ({g['size']})" for g in groups],
            phi_sizes={k: len(v) for k, v in phi.items()},
            speaker_only_groups=sum(g["speaker_only"] for g in groups), speaker_order=ctx.mg_speaker_only_groups,
        ),
    }


def _assess_fixed_tokens(state: MGRetrievalState) -> int:
    """Tokens of an assess prompt before its new memories (template, question, a, H)."""
    critical = state.get("critical_memories") or []
    return estimate_tokens(load_prompt(METHOD, "assess") + state["question"] + (state.get("draft_answer") or "")
                           + memory_lines(critical)) + 150


def retrieve_round(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    question = state["question"]
    pyramid = state.get("mg_pyramid") or []
    masks = set(state.get("masks") or [])
    iteration = state.get("iteration", 0)
    rnd = iteration + 1
    cursor = state.get("mg_cursor", 0)

    if iteration >= max(0, ctx.mg_max_rounds):
        return {"mg_exhausted": True, "mg_new_memories": [],
                "trace": emit("retrieve_round", round=rnd, exhausted=True, note="round budget spent")}

    skipped: list[str] = []
    group: dict[str, Any] | None = None
    fresh: list[str] = []
    while cursor < len(pyramid):
        cand = pyramid[cursor]
        cursor += 1
        fresh = [t for t in cand["ids"] if t not in masks]  # eq. 11: R̃ = s(P) minus everything shown
        if fresh:
            group = cand
            break
        skipped.append(" + ".join(cand["keywords"]))  # fully shown: skipped without a round

    note = None
    cap = max(1, ctx.mg_max_new_per_round)
    if group is None:
        # Round 1 with no group: the spec's dense pseudo-group (mg_empty_fallback). A later round whose
        # pyramid ran out before the round budget: the same dense round over the turns not shown yet
        # (mg_exhausted_fallback, our addition; "stop" = the spec).
        dense = ctx.mg_empty_fallback == "dense" if iteration == 0 else ctx.mg_exhausted_fallback == "dense"
        if dense:
            fresh = _dense_turns(ws, ns, question, masks, cap)
            if fresh:
                group = {"level": 0, "keywords": [], "size": len(fresh), "ids": fresh}
                if iteration == 0:
                    note = ("no keyword selected" if not state.get("mg_keywords") else "no keyword group has any memory") + \
                           f": dense fallback over the top {len(fresh)} turns"
                else:
                    note = f"pyramid exhausted: dense round over the next {len(fresh)} nearest turns"
        if group is None:
            why = "pyramid exhausted" if pyramid else "no keyword group and no fallback"
            return {
                "mg_exhausted": True, "mg_new_memories": [], "mg_group": None, "mg_cursor": cursor,
                "trace": emit("retrieve_round", round=rnd, exhausted=True, skipped_fully_shown=skipped, note=why),
            }

    # Cap: the turns most similar to the question; the overflow is neither shown nor masked.
    order = _turn_order(ws, ns)
    fresh.sort(key=lambda t: order.get(t, 1 << 30))
    kept = _top_by_similarity(ws, ns, question, fresh, cap)
    n_capped = len(fresh) - len(kept)
    # Dense fill (mg_dense_fill, our addition; 0 = the spec): a keyword group with only a few new
    # memories is topped up with the question's nearest unmasked turns, within the per-round cap, so a
    # narrow group never leaves the model a handful of turns. They are shown and masked like the rest.
    fill_to = min(max(0, ctx.mg_dense_fill), cap) if group["level"] > 0 else 0
    filled = _dense_turns(ws, ns, question, masks | set(fresh), fill_to - len(kept)) if len(kept) < fill_to else []
    kept += filled

    turns = ws.turns(ns)
    dates = _session_dates(ws, ns)
    kept.sort(key=lambda t: order.get(t, 1 << 30))  # shown in conversation (session date, turn) order
    new_mems = [_memory(turns[t], dates.get(t, "")) for t in kept if t in turns]

    # Prompt budget: drop the least similar of the kept memories until the assess prompt fits.
    budget = ctx.max_prompt_tokens - _assess_fixed_tokens(state)
    used = sum(estimate_tokens(memory_line(m)) for m in new_mems)
    n_budget_cut = 0
    if used > budget and len(new_mems) > 1:
        sims = _similarities(ws, ns, question, [m["id"] for m in new_mems])
        for m in sorted(new_mems, key=lambda m: (sims.get(m["id"], 0.0), -order.get(m["id"], 0))):
            if used <= budget or len(new_mems) - n_budget_cut <= 1:
                break
            m["_drop"] = True
            used -= estimate_tokens(memory_line(m))
            n_budget_cut += 1
        new_mems = [m for m in new_mems if not m.pop("_drop", False)]
    shown = [m["id"] for m in new_mems]
    filled_shown = [t for t in shown if t in filled]
    return {
        "mg_group": group,
        "mg_new_memories": new_mems,
        "mg_cursor": cursor,
        "mg_exhausted": False,
        "masks": shown,
        "retrieved": new_mems,
        "trace": emit(
            "retrieve_round", round=rnd, level=group["level"], keywords=group["keywords"], size=group["size"],
            n_new=len(shown), n_capped=n_capped, n_budget_cut=n_budget_cut, new_ids=shown,
            n_filled=len(filled_shown), filled_ids=filled_shown, skipped_fully_shown=skipped, note=note,
            # A speaker-only group (Φ ≈ half the conversation) or a capped one degrades the round to
            # dense top-k retrieval over its members; counted per question in the eval summary.
            speaker_only=bool(group.get("speaker_only")), cap_truncated=n_capped > 0,
        ),
    }


def _union(held: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """H(r-1) ∪ R̃(r), H first, each memory once."""
    ids = {m["id"] for m in held}
    return [*held, *[m for m in new if m["id"] not in ids]]


def _critical_fallback(ws: Workspace, ns: str, question: str, pool: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    ids = _top_by_similarity(ws, ns, question, [m["id"] for m in pool], n)
    keep = set(ids)
    return [m for m in pool if m["id"] in keep]


def assess(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    question = state["question"]
    previous = state.get("draft_answer") or ""
    held = list(state.get("critical_memories") or [])
    new = list(state.get("mg_new_memories") or [])
    rnd = state.get("iteration", 0) + 1

    # I(r) = (q, a(r-1), H(r-1), R̃(r)) and nothing else from earlier rounds (eq. 12).
    user = render_prompt(METHOD, "assess", question=question, previous_answer=previous or "(none yet)",
                         critical=memory_lines(held), new=memory_lines(new), max_critical=ctx.mg_max_critical)
    model = get_chat_model(ctx, role="main")
    res = call_structured(model, messages(None, user), AssessReply, node="assess",
                          method=ctx.structured_method, max_tokens=200)

    pool = {m["id"]: m for m in [*held, *new]}
    cap = max(1, ctx.mg_max_critical)
    note: dict[str, Any] = {}
    dropped: list[str] = []
    claimed = False
    if res.value is not None:
        reply = res.value
        answer = reply.answer.strip() or previous
        claimed = sufficient = bool(reply.sufficient)
        ids: list[str] = []
        for cid in reply.critical_ids:
            if cid in pool and cid not in ids:
                ids.append(cid)
            elif cid not in pool:
                dropped.append(cid)  # never let the model invent or resurrect an id
        critical = [pool[i] for i in ids[:cap]]  # H(r) replaces H(r-1) (eq. 13)
        if not critical and reply.answer.strip():
            # Our addition: an answer that names no critical memory keeps the shown memories that
            # contain it, so H (and therefore supports) is not silently empty.
            grounded = grounded_supports(ctx, ns, reply.answer, list(pool), limit=cap)
            critical = [pool[i] for i in grounded]
            if critical:
                note = {"critical_from": "memories containing the answer (the reply listed none)"}
        if not critical and ctx.mg_keep_critical_when_none:
            # Our addition (false = the spec's literal eq. 13, an empty H): a reply that names no shown
            # memory keeps H(r-1) ∪ R̃(r) cut by similarity, as the malformed-reply fallback does, so
            # the next round and the rewrite still see the memories found so far.
            critical = _critical_fallback(ws, ns, question, _union(held, new), cap)
            if critical:
                note = {"critical_from": "H(r-1) ∪ R̃(r) by similarity (the reply named no shown memory)"}
    else:
        answer, sufficient = previous, False
        critical = _critical_fallback(ws, ns, question, _union(held, new), cap)
        note = {**res.failure_note(), "fallback_rule": "keep a(r-1); H(r) = H(r-1) ∪ R̃(r) cut by similarity"}
    grounded = None
    if claimed and ctx.mg_assess_grounding:
        # Our addition (false = the spec): the model's "sufficient" is accepted only when the answer is
        # in the memories it was shown (their text and date); a "no information" answer never is.
        grounded = not is_no_info(answer) and grounded_in(answer, [f"{m.get('date', '')} {m['text']}" for m in pool.values()])
        sufficient = grounded
        if not grounded:
            note["why_not_sufficient"] = ("a 'no information' answer is never sufficient" if is_no_info(answer)
                                          else "the answer is not found in the memories shown")
    iteration = state.get("iteration", 0) + 1
    stop = "sufficient" if sufficient else ("round limit" if iteration >= ctx.mg_max_rounds else "continue")
    return {
        "draft_answer": answer,
        "mg_sufficient": sufficient,
        "critical_memories": critical,
        "evidence": [memory_line(m) for m in critical],
        "supports": [m["id"] for m in critical],
        "iteration": iteration,
        "usage": res.usage,
        "trace": emit(
            "assess", llm_role="main", round=rnd, answer=answer, sufficient=sufficient, claimed_sufficient=claimed,
            grounded=grounded, decision=stop,
            kept_ids=[m["id"] for m in critical], dropped_ids=dropped,
            shown_turn_ids=[*[m["id"] for m in held], *[m["id"] for m in new]], **note,
        ),
    }


def rewrite(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    draft = (state.get("draft_answer") or "").strip()
    critical = list(state.get("critical_memories") or [])
    supports = [m["id"] for m in critical]
    if not draft and not critical:
        return {"answer": NO_INFO, "supports": [], "critical_memories": [],
                "trace": emit("rewrite", llm_role="main", calls=0, answer=NO_INFO,
                              note="nothing was retrieved or answered: no rewrite call")}
    res = rewrite_answer(ctx, state["question"], draft, critical, with_question=ctx.mg_rewrite_with_question,
                         keep_draft=ctx.mg_rewrite_keep_draft)
    answer, note = res.answer, res.note
    return {
        "answer": answer,
        "supports": supports,
        "critical_memories": critical,
        "usage": res.usage,
        "trace": emit("rewrite", llm_role="main", draft=draft, answer=answer, supports=supports,
                      shown_turn_ids=supports, **note),
    }


ROUND_KIND_FIELDS = ("mg_rounds", "mg_speaker_only_rounds", "mg_cap_truncated_rounds", "mg_filled_turns",
                     "mg_ungrounded_sufficient_rounds")


def round_kinds(trace: list[dict[str, Any]]) -> dict[str, int]:
    """Per question: rounds run, how many were speaker-only or cut by the per-round cap, the turns
    added by dense fill, and the rounds whose "sufficient" was rejected as ungrounded."""
    rounds = [r for r in trace if r.get("node") == "retrieve_round" and not r.get("exhausted")]
    assessed = [r for r in trace if r.get("node") == "assess"]
    counts = (len(rounds), sum(bool(r.get("speaker_only")) for r in rounds),
              sum(bool(r.get("cap_truncated")) for r in rounds), sum(int(r.get("n_filled") or 0) for r in rounds),
              sum(r.get("grounded") is False for r in assessed))
    return dict(zip(ROUND_KIND_FIELDS, counts, strict=True))


# --- routers ------------------------------------------------------------------------------------


def route_after_retrieve(state: MGRetrievalState) -> Literal["assess", "rewrite"]:
    return "rewrite" if state.get("mg_exhausted") or not state.get("mg_new_memories") else "assess"


def route_after_assess(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> Literal["retrieve_round", "rewrite"]:
    if state.get("mg_sufficient") or state.get("iteration", 0) >= runtime.context.mg_max_rounds:
        return "rewrite"
    return "retrieve_round"


builder = StateGraph(MGRetrievalState, context_schema=MGRetrievalContext, input_schema=InputState, output_schema=OutputState)
builder.add_node("select_keywords", select_keywords)
builder.add_node("build_pyramid", build_pyramid)
builder.add_node("retrieve_round", retrieve_round)
builder.add_node("assess", assess)
builder.add_node("rewrite", rewrite)
builder.add_edge("select_keywords", "build_pyramid")
builder.add_edge("build_pyramid", "retrieve_round")
builder.add_conditional_edges("retrieve_round", route_after_retrieve, ["assess", "rewrite"])
builder.add_conditional_edges("assess", route_after_assess, ["retrieve_round", "rewrite"])
wire_question_lifecycle(builder, "select_keywords", "rewrite")

graph = builder.compile()
graph.name = "mgretrieval"


def recursion_limit(ctx: MGRetrievalContext) -> int:
    """LangGraph steps a run may take with these settings (rounds times the nodes of a round, plus the rest)."""
    return 4 * ctx.mg_max_rounds + 20
