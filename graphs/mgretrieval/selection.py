"""Keyword selection (p_r1): the `select_keywords` node picks Q, up to `mg_depth` vocabulary keywords
for the question (README.md in this folder, "The graph").

The model only chooses among candidates (question n-grams found in V, then the rest of V by cosine);
a reply outside them falls back to the n-gram hits or the top candidates, so Q is always made of
vocabulary entries. One call to the auxiliary model.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.state import MGRetrievalState
from recollect.graphs.mgretrieval.vocabulary import (
    METHOD,
    VOCAB_KIND,
    KeywordVocabulary,
    normalise_keyword,
    question_ngrams,
)
from recollect.llm.lenient import StrList
from recollect.llm.models import get_chat_model, model_name
from recollect.llm.structured import call_structured
from recollect.memory.workspace import Workspace
from recollect.prompts import render_prompt
from recollect.steps import messages, workspace
from recollect.trace import emit

FALLBACK_SELECT = 2  # selection fallback without n-gram matches: the top-2 candidates by similarity


class SelectReply(BaseModel):
    """p_r1: up to `depth` vocabulary keywords, most important first."""

    keywords: StrList = Field(default_factory=list)


def candidate_keywords(ws: Workspace, namespace: str, question: str, vocab: KeywordVocabulary,
                       limit: int) -> tuple[list[str], list[str]]:
    """Up to `limit` entries: question n-grams found in V first, then the rest by cosine.

    Returns (all candidates, the n-gram hits among them)."""
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
            "trace": emit("select_keywords", llm_role="aux", calls=0, keywords=[],
                          note=f"{why}; no keyword selected"),
        }

    candidates, grams = candidate_keywords(ws, ns, question, vocab, max(1, ctx.mg_select_candidates))
    if not candidates:  # e.g. the mg_vocab collection is missing: re-ingesting re-syncs it
        return {
            "mg_keywords": [], "query": "",
            "trace": emit("select_keywords", llm_role="aux", calls=0, keywords=[],
                          note="no candidate keyword for this question (vocabulary index empty?); "
                               "no keyword selected"),
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
        note["fallback_keywords"] = ("question n-grams found in the vocabulary" if grams
                                     else f"top {FALLBACK_SELECT} candidates by similarity")
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

