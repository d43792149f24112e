"""MRAgent's seed: the initial active set Z(0) for a question (the `seed` node in README.md in this folder).

Relation matching of the question cues against the graph's cues, the temporal path for a time
window, the main path with its K1/K2 caps and the configured LLM pre-selection, cue→tag candidates
with LLM tag scoring and eager expansion. The seed lines are chosen under a share of the prompt
budget; they are not masked here: a turn is masked when the navigate prompt renders it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from langchain_core.messages import HumanMessage

from recollect.budget import TokenBudget
from recollect.graphs.mragent.cues import cue_norm
from recollect.graphs.mragent.layout import EVENTS_KIND, TOPICS_KIND
from recollect.graphs.mragent.schemas import PickReply, ScoreReply
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.tools import tool_catalog
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.memory.turn_ranking import ranked_turns
from recollect.prompts import load_prompt, render_prompt
from recollect.trace import emit

P = "mragent"
_MMDD = re.compile(r"\b(\d{1,2})-(\d{1,2})\b")
_ISO = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b")
SEED_SECTIONS = ("time_events", "key_events", "ranked_turns", "cue_tag_events")  # the sections holding raw turns


def parse_window(text: str) -> list[str] | None:
    """Two YYYY-MM-DD dates (sorted) or two MM-DD dates (in the given order), else None.

    MM-DD pairs keep their order: "12-20 01-10" is a window across the year end, which sorting would
    turn into January to December.
    """
    text = (text or "").strip()
    if not text:
        return None
    isos = _ISO.findall(text)
    if len(isos) == 2:
        try:
            a, b = (date.fromisoformat("-".join(p.zfill(2) for p in s.split("-"))) for s in isos)
        except ValueError:
            return None
        a, b = sorted((a, b))
        return [a.isoformat(), b.isoformat()]
    if isos:
        return None
    mds = _MMDD.findall(text)
    if len(mds) == 2:
        vals = []
        for m, d in mds:
            if not (1 <= int(m) <= 12 and 1 <= int(d) <= 31):
                return None
            vals.append(f"{int(m):02d}-{int(d):02d}")
        return vals
    return None


def in_window(day: str, window: list[str]) -> bool:
    """Whether a YYYY-MM-DD day lies in the window; an MM-DD window applies to every year and may wrap."""
    if not day:
        return False
    a, b = window
    if len(a) == 10:
        return a <= day <= b
    md = day[5:]
    return a <= md <= b if a <= b else (md >= a or md <= b)


def one_per_origin(g: CueTagGraph, ids: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for e in ids:
        o = g.events[e]["origin"]
        if o not in seen:
            seen.add(o)
            out.append(e)
    return out


def _candidate_lines(g: CueTagGraph, ids: list[str]) -> str:
    return "\n".join(f"{e}: {g.events[e]['rewritten']}" for e in ids)


def preselect(
    g: CueTagGraph, ctx: MRAgentContext, question: str, cands: list[str], by_sim: list[str]
) -> tuple[list[str], dict[str, Any], list[dict[str, Any]], list[str]]:
    """The configured pre-selection when more than K2 candidates remain (README.md in this folder):
    (events kept, usage, trace records, turns whose sentences the LLM calls showed)."""
    k2 = ctx.mra_k2
    emb_top = by_sim[:k2]
    usage: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    if ctx.mra_preselect == "embedding":
        return emb_top, usage, records, []
    shown = sorted({g.events[e]["origin"] for e in cands})
    text = _candidate_lines(g, cands)
    model = get_chat_model(ctx)
    res = call_structured(model, [HumanMessage(content=render_prompt(P, "event_pick", question=question,
                                                                      candidates=text, k=k2))],
                          PickReply, node="seed_pick", method=ctx.structured_method, max_tokens=300)
    usage = merge_usage(usage, res.usage)
    picked = [e for e in dict.fromkeys(res.value.events) if e in cands][:k2] if res.value else []
    if not picked:
        picked = emb_top
    records += emit("seed_pick", candidates=len(cands), picked=picked, shown_turn_ids=shown,
                    **(res.failure_note() if res.value is None else {}),
                    **({"fallback_to": "embedding top"} if res.value is not None and picked == emb_top else {}))
    if ctx.mra_preselect == "llm_pick":
        return picked, usage, records, shown
    res2 = call_structured(model, [HumanMessage(content=render_prompt(P, "event_score", question=question,
                                                                       candidates=text))],
                           ScoreReply, node="seed_score", method=ctx.structured_method, max_tokens=900)
    usage = merge_usage(usage, res2.usage)
    if res2.value is not None:
        scored = sorted(((s, e) for e, s in res2.value.scores.items() if e in cands and s > 0), key=lambda x: -x[0])
        top = [e for _, e in scored[:k2]]
    else:
        top = emb_top
    records += emit("seed_score", top=top, shown_turn_ids=shown,
                    **(res2.failure_note() if res2.value is None else {}))
    union = set(picked) | set(top)
    return [e for e in cands if e in union], usage, records, shown


def by_similarity(g: CueTagGraph, question: str, tags: dict[str, list[str]]) -> list[str]:
    """A cue's tags, best first by their best event's similarity to the question."""
    sims = g.ranking(EVENTS_KIND, question)
    return sorted(tags, key=lambda t: -max(sims.get(e, -1) for e in tags[t]))


def cue_tags(
    g: CueTagGraph, ctx: MRAgentContext, question: str, cues: list[dict[str, Any]]
) -> tuple[list[tuple[str, list[str], dict[str, float]]], dict[str, Any], list[dict[str, Any]]]:
    """Question cues whose normalised form equals a graph cue: (cue, tags kept, tag scores)."""
    out: list[tuple[str, list[str], dict[str, float]]] = []
    usage: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    done: set[str] = set()
    for qc in cues:
        for form in [qc["cue"], *qc.get("alternatives", [])]:
            norm = cue_norm(form)
            if not norm or norm in done or norm not in g.cues:
                continue
            done.add(norm)
            entry = g.cues[norm]
            tags = list(entry["tags"])
            scores: dict[str, float] = {}
            if len(tags) > ctx.mra_tag_max and ctx.mra_tag_score == "embedding":
                tags = by_similarity(g, question, entry["tags"])[: ctx.mra_tag_keep]
                records += emit("seed_tag_score", cue=entry["cue"], kept=tags, ranked_by="embedding",
                                skipped_call="seed_tag_score (mra_tag_score=embedding)")
            elif len(tags) > ctx.mra_tag_max:
                res = call_structured(
                    get_chat_model(ctx),
                    [HumanMessage(content=render_prompt(P, "tag_score", question=question, cue=entry["cue"],
                                                        tags=", ".join(tags)))],
                    ScoreReply, node="seed_tag_score", method=ctx.structured_method, max_tokens=600,
                )
                usage = merge_usage(usage, res.usage)
                if res.value is not None:
                    scores = {t: s for t, s in res.value.scores.items() if t in entry["tags"] and s > 0}
                    tags = sorted(scores, key=lambda t: -scores[t])[: ctx.mra_tag_keep]
                else:
                    tags = by_similarity(g, question, entry["tags"])[: ctx.mra_tag_keep]
                records += emit("seed_tag_score", cue=entry["cue"], kept=tags, scores=scores,
                                **(res.failure_note() if res.value is None else {}))
            out.append((entry["cue"], tags, scores))
    return out, usage, records


def _paths(g: CueTagGraph, ctx: MRAgentContext, question: str, cues: list[dict[str, Any]], window: list[str] | None
           ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Relation matching, then the temporal or the main path: the ranked candidates before rendering."""
    full, partial = g.match_question(cues, ctx.mra_jaccard)
    sims = g.ranking(EVENTS_KIND, question)
    usage: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    path, why = "main", "no time window"
    time_events: list[str] = []
    key_events: list[str] = []
    if window:
        in_win = [e for e, ev in g.events.items() if in_window(ev.get("time", ""), window)]
        if 0 < len(in_win) < ctx.mra_time_event_limit:
            time_events, why = in_win, f"{len(in_win)} events in the window (< {ctx.mra_time_event_limit})"
        elif in_win:
            time_events = [e for e in in_win if e in full or partial.get(e, 0) >= 1]
            why = f"{len(in_win)} events in the window; {len(time_events)} also match a cue"
        else:
            why = "no event in the window"
        if time_events:
            path = "temporal"
        else:
            why += "; main path"
    pre_n = 0
    topics: list[str] = []
    shown: list[str] = []
    if path == "main":
        n_cues = max(1, len(cues))
        cands = full + [e for e, c in partial.items() if c >= 2]
        hits = {**{e: n_cues for e in full}, **partial}
        cands.sort(key=lambda e: (-hits.get(e, 0), -sims.get(e, -1.0)))
        cands = one_per_origin(g, cands)
        pre_n = len(cands)
        if len(cands) > ctx.mra_k1:
            cands = sorted(cands, key=lambda e: -sims.get(e, -1.0))[: ctx.mra_k1]
        if len(cands) > ctx.mra_k2:
            by_sim = sorted(cands, key=lambda e: -sims.get(e, -1.0))
            cands, u, recs, shown = preselect(g, ctx, question, cands, by_sim)
            usage, records = merge_usage(usage, u), records + recs
        key_events = cands
        tsims = g.ranking(TOPICS_KIND, question)
        topics = sorted(g.topics, key=lambda t: -tsims.get(t, -1.0))[: ctx.mra_topic_k]
    found = {"path": path, "why": why, "time_events": time_events, "key_events": key_events, "topics": topics,
             "full": len(full), "partial": len(partial), "pre_n": pre_n, "shown_turn_ids": shown}
    return found, usage, records


def _ranked_turns(g: CueTagGraph, ctx: MRAgentContext, question: str, taken: set[str]) -> list[str]:
    """mra_seed_ranked_turns: the turns most relevant to the question (cosine and BM25 fused) not yet taken."""
    n = ctx.mra_seed_ranked_turns
    if n <= 0 or not question:
        return []
    ranked = ranked_turns(g.ws, g.namespace, question, list(g.turns), n + len(taken), "hybrid")
    return [t for t in ranked if t not in taken][:n]


def seed_budget(ctx: MRAgentContext, question: str) -> int:
    """The seed's share (`mra_seed_share`) of the navigate prompt (the rest is for H and the newest tool results)."""
    overhead = estimate_tokens(load_prompt(P, "navigate") + load_prompt(P, "protocol_json") + tool_catalog()
                               + load_prompt(P, "answer_rules") + question) + 100
    return max(200, int((ctx.max_prompt_tokens - overhead) * ctx.mra_seed_share))


@dataclass
class Seed:
    """The seed node's result: the sections as rendered lines (`mra_seed`), the topic ids listed, the
    usage and trace records of its LLM calls, and the turns those calls showed the model."""

    sections: dict[str, Any]
    topic_ids: list[str]
    usage: dict[str, Any]
    records: list[dict[str, Any]]
    shown_turn_ids: list[str] = field(default_factory=list)
    # every turn the seed's paths and cue tags reached, including those dropped for the seed budget
    retrieved_turn_ids: list[str] = field(default_factory=list)


def build_seed(
    g: CueTagGraph, ctx: MRAgentContext, question: str, cues: list[dict[str, Any]], window: list[str] | None,
    masks: set[str],
) -> Seed:
    """The seed for a question; the lines are not masked here (the navigate prompt masks what it renders)."""
    found, usage, records = _paths(g, ctx, question, cues, window)
    tags, u, recs = cue_tags(g, ctx, question, cues)
    usage, records = merge_usage(usage, u), records + recs

    # Choose lines under the seed's budget, highest rank first; a line that does not fit is dropped and
    # the next one still tried. Every line costs its tokens plus one for its newline.
    fits = TokenBudget(seed_budget(ctx, question), per_line=1).take
    dropped: list[str] = []
    chosen: list[str] = []
    topic_ids: list[str] = []
    seed_out: dict[str, Any] = {"path": found["path"], "time_events": [], "key_events": [], "ranked_turns": [],
                                "cue_tags": [], "cue_tag_events": [], "topics": []}

    def take(section: str, turn_id: str) -> None:
        """The turn's line in `section` if it fits the seed's budget, else noted as dropped for it."""
        line = g.raw_line(turn_id)
        if not fits(line):
            dropped.append(turn_id)
            return
        seed_out[section].append(line)
        chosen.append(turn_id)

    for section in ("time_events", "key_events"):
        for e in one_per_origin(g, found[section]):
            if (o := g.events[e]["origin"]) not in chosen:
                take(section, o)
    for o in _ranked_turns(g, ctx, question, set(chosen) | masks):
        take("ranked_turns", o)
    expanded_from: list[str] = []
    for cue, kept, scores in tags:
        line = f"{cue} -> {', '.join(kept)}"
        if kept and fits(line):
            seed_out["cue_tags"].append(line)
        for t in kept:
            if scores.get(t, 0) < ctx.mra_tag_expand_threshold:
                continue
            expanded_from.append(f"{cue}/{t}")
            for e in one_per_origin(g, g.rank_events(g.cues[cue_norm(cue)]["tags"][t], question)):
                o = g.events[e]["origin"]
                if o in chosen or o in masks:
                    continue
                if len(seed_out["cue_tag_events"]) >= ctx.mra_tool_event_cap:
                    break
                take("cue_tag_events", o)
    for t in found["topics"]:
        line = f"{t}: {g.topics[t]['text']}"
        if fits(line):
            seed_out["topics"].append(line)
            topic_ids.append(t)
    records += emit(
        "seed", path=found["path"], why=found["why"], full_matches=found["full"], partial_matches=found["partial"],
        candidates_before_caps=found["pre_n"], key_events=len(seed_out["key_events"]),
        time_events=len(seed_out["time_events"]), ranked_turns=[ln.split(": ", 1)[0] for ln in seed_out["ranked_turns"]],
        cue_tags=seed_out["cue_tags"], expanded=expanded_from,
        topics=topic_ids, dropped_for_budget=dropped, seed_turn_ids=chosen,
    )
    reached = list(dict.fromkeys([*found["shown_turn_ids"], *chosen, *dropped]))
    return Seed(seed_out, topic_ids, usage, records, found["shown_turn_ids"], reached)
