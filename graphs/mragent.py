"""MRAgent: an agent that reconstructs the evidence for a question over a Cue–Tag–Content graph.

START → extract_cues → seed → navigate → route ─┬─ answer JSON → answer → END
                                                ├─ calls → tools ─┬─ rounds/calls left → navigate …
                                                │                 └─ budget exhausted → answer (forced)
                                                └─ nothing usable → navigate, or answer (forced)

`navigate` is the only LLM call of the loop; its prompt is rebuilt from state every round.
`route` is deterministic: it normalises native `tool_calls` and the JSON protocol into the same
`mra_pending_calls`, applies the model's keep/prune decision, and enforces the per-round and
per-question call caps. `tools` runs the registry in `app.mragent_tools`. The round and call
budgets are enforced here, in code. See specs/methods/mragent.md.
"""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, ValidationError, field_validator

from app.config import Context
from app.ingest.mragent import (
    EVENTS_KIND,
    STOPWORDS,
    TOPICS_KIND,
    CueTagGraph,
    cue_norm,
    fallback_cues,
    turn_of,
)
from app.llm.lenient import StrList, Text
from app.llm.models import get_chat_model
from app.llm.structured import call_structured, invoke_counted, json_format_kwargs, resolve_method
from app.llm.usage import estimate_tokens, merge_usage
from app.mragent_tools import REGISTRY, ToolContext, error_result, execute, structured_tools, tool_catalog
from app.prompts import load_prompt, render_prompt
from app.state import InputState, MemoryState, OutputState
from app.trace import emit
from graphs.common import NO_INFO, workspace

P = "mragent"
_MMDD = re.compile(r"\b(\d{1,2})-(\d{1,2})\b")
_ISO = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b")


def _graph(ctx: Context, namespace: str) -> CueTagGraph:
    return CueTagGraph.load(workspace(ctx), namespace)


def _ids(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [x.strip() for x in re.split(r"[,\s]+", v) if x.strip()]
    if isinstance(v, list):
        return [str(x).strip() for x in v if x is not None and str(x).strip()]
    return []


# --------------------------------------------------------------------------------------------- schemas


class QuestionCue(BaseModel):
    cue: str
    alternatives: StrList = Field(default_factory=list)


class QuestionCuesReply(BaseModel):
    time_window: str = ""
    cues: list[QuestionCue]

    @field_validator("time_window", mode="before")
    @classmethod
    def _window(cls, v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, list):
            return " ".join(str(x) for x in v)
        return str(v)

    @field_validator("cues", mode="before")
    @classmethod
    def _cues(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"cue": x} if isinstance(x, str) else x for x in v if x]
        return v


class PickReply(BaseModel):
    events: list[str] = Field(default_factory=list)

    @field_validator("events", mode="before")
    @classmethod
    def _events(cls, v: Any) -> Any:
        return _ids(v) if not isinstance(v, list) else [str(x.get("id") if isinstance(x, dict) else x) for x in v]


class ScoreReply(BaseModel):
    scores: dict[str, float] = Field(default_factory=dict)

    @field_validator("scores", mode="before")
    @classmethod
    def _scores(cls, v: Any) -> Any:
        if v is None or v == "None":
            return {}
        if isinstance(v, list):  # [{"id": .., "score": ..}]
            out = {}
            for item in v:
                if isinstance(item, dict):
                    key = item.get("id") or item.get("tag") or item.get("event")
                    if key is not None:
                        out[str(key)] = item.get("score", 0)
            return out
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                try:
                    out[str(k)] = min(1.0, max(0.0, float(x)))
                except (TypeError, ValueError):
                    continue
            return out
        return v


class FinalReply(BaseModel):
    answer: Text
    supports: list[str] = Field(default_factory=list)
    confidence: float | None = None

    @field_validator("supports", mode="before")
    @classmethod
    def _supports(cls, v: Any) -> Any:
        return _ids(v)

    @field_validator("confidence", mode="before")
    @classmethod
    def _conf(cls, v: Any) -> Any:
        try:
            return None if v is None else min(1.0, max(0.0, float(v)))
        except (TypeError, ValueError):
            return None


class ProtocolCall(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class NavigateJSON(BaseModel):
    """The JSON protocol's union (navigate or answer); only used to constrain the reply."""

    mode: Literal["navigate", "answer"]
    calls: list[ProtocolCall] = Field(default_factory=list)
    keep: list[str] = Field(default_factory=list)
    answer: str = ""
    supports: list[str] = Field(default_factory=list)
    confidence: float = 0.0


# --------------------------------------------------------------------------------------------- JSON binding


def _json_bound(model: Any, ctx: Context, schema: type[BaseModel], max_tokens: int) -> Any:
    """The model constrained to a JSON schema where the endpoint supports it (no tools bound)."""
    # function_calling binds no response format here: the JSON protocol reads the reply's text
    return model.bind(max_tokens=max_tokens, **json_format_kwargs(schema, resolve_method(model, ctx.structured_method)))


def json_objects(text: str) -> list[Any]:
    """Every top-level JSON object or array in a reply (fences and surrounding prose allowed)."""
    out: list[Any] = []
    if not text:
        return out
    dec = json.JSONDecoder()
    i, n = 0, len(text)
    while i < n:
        j = min((k for k in (text.find("{", i), text.find("[", i)) if k >= 0), default=-1)
        if j < 0:
            break
        try:
            obj, end = dec.raw_decode(text, j)
        except json.JSONDecodeError:
            i = j + 1
            continue
        if isinstance(obj, dict | list):
            out.append(obj)
        i = end
    if not out:
        try:
            import json_repair

            repaired = json_repair.loads(text[text.find("{"):] if "{" in text else text)
            if isinstance(repaired, dict | list) and repaired:
                out.append(repaired)
        except Exception:  # json-repair is best effort; a reply with no JSON is simply unusable
            pass
    return out


# --------------------------------------------------------------------------------------------- protocol parsing


def _call_args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return {} if raw is None else raw


def parse_reply(raw: dict[str, Any] | None) -> dict[str, Any]:
    """One navigate reply → `{calls: [{tool, args}], answer: {...} | None, keep, prune, reason, form}`.

    Order (spec §3.3 route): native tool_calls; a JSON navigate object; a JSON answer object;
    bare `{name, arguments}` objects or lists of them.
    """
    out: dict[str, Any] = {"calls": [], "answer": None, "keep": [], "prune": [], "reason": None, "form": None}
    raw = raw or {}
    objs = json_objects(raw.get("content") or "")
    for obj in objs:
        if isinstance(obj, dict):
            out["keep"] += _ids(obj.get("keep"))
            out["prune"] += _ids(obj.get("prune"))
            if out["reason"] is None and isinstance(obj.get("reason") or obj.get("why"), str):
                out["reason"] = obj.get("reason") or obj.get("why")
    if raw.get("tool_calls"):
        out["calls"] = [{"tool": str(tc.get("name") or ""), "args": _call_args(tc.get("args"))}
                        for tc in raw["tool_calls"]]
        out["form"] = "native"
        return out
    for obj in objs:
        if isinstance(obj, dict) and isinstance(obj.get("calls"), list) and obj.get("mode", "navigate") == "navigate":
            for c in obj["calls"]:
                if isinstance(c, dict):
                    name = c.get("tool") or c.get("name") or ""
                    out["calls"].append({"tool": str(name), "args": _call_args(c.get("args", c.get("arguments")))})
            if out["calls"]:
                out["form"] = "json_navigate"
                return out
    for obj in objs:
        if isinstance(obj, dict) and (obj.get("mode") == "answer" or ("answer" in obj and "calls" not in obj)):
            try:
                out["answer"] = FinalReply.model_validate(obj).model_dump()
            except ValidationError:
                continue
            if out["answer"]["answer"].strip():
                out["form"] = "json_answer"
                return out
            out["answer"] = None
    bare: list[dict[str, Any]] = []
    for obj in objs:
        items = obj if isinstance(obj, list) else [obj]
        for it in items:
            if isinstance(it, dict) and isinstance(it.get("function"), dict):  # OpenAI-style wrapper
                it = it["function"]
            if isinstance(it, dict) and isinstance(it.get("name"), str) and ("arguments" in it or "args" in it
                                                                            or "parameters" in it):
                args = it.get("arguments", it.get("args", it.get("parameters")))
                bare.append({"tool": it["name"], "args": _call_args(args)})
    if bare:
        out["calls"] = bare
        out["form"] = "bare"
    return out


def _norm_args(args: Any) -> str:
    if isinstance(args, dict):
        clean = {str(k).strip().lower(): (v.strip().lower() if isinstance(v, str) else v) for k, v in args.items()}
        return json.dumps(clean, sort_keys=True, default=str)
    return json.dumps(args, sort_keys=True, default=str)


def call_key(tool: str, args: Any) -> str:
    return f"{tool.strip()}|{_norm_args(args)}"


# --------------------------------------------------------------------------------------------- extract_cues


def _parse_window(text: str) -> list[str] | None:
    """Two YYYY-MM-DD dates or two MM-DD dates (start ≤ end), else None."""
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
        return sorted(vals)
    return None


def extract_cues(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    _graph(ctx, state["namespace"])  # a namespace with no graph fails here, before any LLM call
    question = state["question"]
    res = call_structured(
        get_chat_model(ctx), [HumanMessage(content=render_prompt(P, "question_cues", question=question))],
        QuestionCuesReply, node="extract_cues", method=ctx.structured_method, max_tokens=300,
    )
    note: dict[str, Any] = {}
    window = None
    cues: list[dict[str, Any]] = []
    if res.value is not None:
        cues = [{"cue": c.cue.strip(), "alternatives": [a.strip() for a in c.alternatives if a.strip()][:8]}
                for c in res.value.cues if c.cue.strip()]
        window = _parse_window(res.value.time_window)
        if res.value.time_window.strip() and window is None:
            note["bad_time_window"] = res.value.time_window
    if not cues:
        note.update(res.failure_note() if res.value is None else {"fallback": True, "error": "no cues"})
        toks = [t for t in fallback_cues(question, 12) if t.lower() not in STOPWORDS]
        cues = [{"cue": t, "alternatives": []} for t in toks]
        window = None
    seen = [cue_norm(c["cue"]) for c in cues if cue_norm(c["cue"])]
    return {
        "mra_cues": cues,
        "mra_time_window": window,
        "mra_seen_cues": seen,
        "iteration": 0,
        "mra_calls_total": 0,
        "mra_forced_final": False,
        "draft_answer": None,
        "usage": res.usage,
        "trace": emit("extract_cues", cues=[c["cue"] for c in cues],
                      alternatives={c["cue"]: c["alternatives"] for c in cues}, time_window=window, **note),
    }


# --------------------------------------------------------------------------------------------- seed


def _in_window(day: str, window: list[str]) -> bool:
    if not day:
        return False
    a, b = window
    if len(a) == 10:
        return a <= day <= b
    md = day[5:]
    return a <= md <= b if a <= b else (md >= a or md <= b)


def _one_per_origin(g: CueTagGraph, ids: list[str]) -> list[str]:
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


def _preselect(
    g: CueTagGraph, ctx: Context, question: str, cands: list[str], by_sim: list[str]
) -> tuple[list[str], dict[str, Any], list[dict[str, Any]]]:
    """The configured pre-selection when more than K2 candidates remain (spec §3.3 seed 3.3)."""
    k2 = ctx.mra_k2
    emb_top = by_sim[:k2]
    usage: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    if ctx.mra_preselect == "embedding":
        return emb_top, usage, records
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
        return picked, usage, records
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
    return [e for e in cands if e in union], usage, records


def _cue_tags(
    g: CueTagGraph, ctx: Context, question: str, cues: list[dict[str, Any]]
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
            if len(tags) > ctx.mra_tag_max:
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
                    sims = g.ranking(EVENTS_KIND, question)
                    tags = sorted(tags, key=lambda t: -max(sims.get(e, -1) for e in entry["tags"][t]))
                    tags = tags[: ctx.mra_tag_keep]
                records += emit("seed_tag_score", cue=entry["cue"], kept=tags, scores=scores,
                                **(res.failure_note() if res.value is None else {}))
            out.append((entry["cue"], tags, scores))
    return out, usage, records


def seed(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    g = _graph(ctx, state["namespace"])
    question = state["question"]
    cues = state.get("mra_cues") or []
    full, partial = g.match_question(cues, ctx.mra_jaccard)
    sims = g.ranking(EVENTS_KIND, question)
    window = state.get("mra_time_window")
    usage: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    path, why = "main", "no time window"
    time_events: list[str] = []
    key_events: list[str] = []
    if window:
        in_win = [e for e, ev in g.events.items() if _in_window(ev.get("time", ""), window)]
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
    if path == "main":
        n_cues = max(1, len(cues))
        cands = full + [e for e, c in partial.items() if c >= 2]
        hits = {**{e: n_cues for e in full}, **partial}
        cands.sort(key=lambda e: (-hits.get(e, 0), -sims.get(e, -1.0)))
        cands = _one_per_origin(g, cands)
        pre_n = len(cands)
        if len(cands) > ctx.mra_k1:
            cands = sorted(cands, key=lambda e: -sims.get(e, -1.0))[: ctx.mra_k1]
        if len(cands) > ctx.mra_k2:
            by_sim = sorted(cands, key=lambda e: -sims.get(e, -1.0))
            cands, u, recs = _preselect(g, ctx, question, cands, by_sim)
            usage, records = merge_usage(usage, u), records + recs
        key_events = cands
        tsims = g.ranking(TOPICS_KIND, question)
        topics = sorted(g.topics, key=lambda t: -tsims.get(t, -1.0))[: ctx.mra_topic_k]
    cue_tags, u, recs = _cue_tags(g, ctx, question, cues)
    usage, records = merge_usage(usage, u), records + recs

    # Render under the prompt budget, highest rank first; what does not fit is dropped, not masked.
    overhead = estimate_tokens(load_prompt(P, "navigate") + load_prompt(P, "protocol_json") + tool_catalog()
                               + load_prompt(P, "answer_rules") + question) + 100
    budget = max(200, int((ctx.max_prompt_tokens - overhead) * 0.6))  # the rest is for tool results
    used = 0
    dropped: list[str] = []
    shown_origins: list[str] = []
    visible: list[str] = []
    seed_out: dict[str, Any] = {"path": path, "time_events": [], "key_events": [], "cue_tags": [],
                                "cue_tag_events": [], "topics": []}

    def fits(line: str) -> bool:
        nonlocal used
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            return False
        used += cost
        return True

    for section, ids in (("time_events", time_events), ("key_events", key_events)):
        for e in _one_per_origin(g, ids):
            o = g.events[e]["origin"]
            line = g.raw_line(o)
            if o in shown_origins:
                continue
            if not fits(line):
                dropped.append(o)
                continue
            seed_out[section].append(line)
            shown_origins.append(o)
            visible += [o, *g.sentences_of(o)]
    expanded_from: list[str] = []
    for cue, tags, scores in cue_tags:
        line = f"{cue} -> {', '.join(tags)}"
        if tags and fits(line):
            seed_out["cue_tags"].append(line)
        for t in tags:
            if scores.get(t, 0) < ctx.mra_tag_expand_threshold:
                continue
            expanded_from.append(f"{cue}/{t}")
            for e in _one_per_origin(g, g.rank_events(g.cues[cue_norm(cue)]["tags"][t], question)):
                o = g.events[e]["origin"]
                if o in shown_origins or o in (state.get("masks") or []):
                    continue
                if len(seed_out["cue_tag_events"]) >= ctx.mra_tool_event_cap:
                    break
                line = g.raw_line(o)
                if not fits(line):
                    dropped.append(o)
                    continue
                seed_out["cue_tag_events"].append(line)
                shown_origins.append(o)
                visible += [o, *g.sentences_of(o)]
    for t in topics:
        line = f"{t}: {g.topics[t]['text']}"
        if fits(line):
            seed_out["topics"].append(line)
            visible.append(t)
    evidence = [*seed_out["time_events"], *seed_out["key_events"], *seed_out["cue_tag_events"]]
    records += emit(
        "seed", path=path, why=why, full_matches=len(full), partial_matches=len(partial),
        candidates_before_caps=pre_n, key_events=len(seed_out["key_events"]),
        time_events=len(seed_out["time_events"]), cue_tags=seed_out["cue_tags"], expanded=expanded_from,
        topics=[t.split(": ", 1)[0] for t in seed_out["topics"]],
        dropped_for_budget=dropped, shown_turn_ids=shown_origins,
    )
    return {
        "mra_seed": seed_out,
        "evidence": list(state.get("evidence") or []) + evidence,
        "masks": shown_origins,
        "mra_visible_ids": list(dict.fromkeys(visible)),
        "mra_forced_final": ctx.mra_max_rounds <= 1,
        "usage": usage,
        "trace": records,
    }


# --------------------------------------------------------------------------------------------- navigate


def _seed_text(seed_out: dict[str, Any]) -> str:
    parts = []
    for key, title in (("time_events", "Events in the question's time window"), ("key_events", "Key events"),
                       ("cue_tags", "Cue -> tags (use with query_tag_events)"),
                       ("cue_tag_events", "Events from strongly matching cue tags"), ("topics", "Similar topics")):
        lines = seed_out.get(key) or []
        if lines:
            parts.append(f"{title}:\n" + "\n".join(lines))
    return "\n".join(parts) or "(nothing matched the question's cues)"


def _call_text(entry: dict[str, Any]) -> str:
    return f"{entry['tool']}({json.dumps(entry.get('args'), ensure_ascii=False, default=str)})"


def _tool_log_text(log: list[dict[str, Any]], budget: int) -> str:
    """Newest first; once the budget is spent, older results keep only their call and ids."""
    lines: list[str] = []
    used = 0
    for entry in reversed(log):
        full = f"[round {entry['round']}] {_call_text(entry)} ->\n{entry['text']}"
        cost = estimate_tokens(full)
        if used + cost <= budget:
            lines.append(full)
            used += cost
        else:
            short = f"[round {entry['round']}] {_call_text(entry)} -> ids: {', '.join(entry.get('result_ids') or []) or '-'}"
            lines.append(short)
            used += estimate_tokens(short)
    return "\n".join(lines) or "(none yet)"


def _protocol(ctx: Context) -> tuple[str, str]:
    if ctx.mra_tool_protocol == "native":
        return load_prompt(P, "protocol_native"), ", ".join(REGISTRY)
    return load_prompt(P, "protocol_json"), tool_catalog()


def navigate_prompt(state: MemoryState, ctx: Context) -> str:
    it = state.get("iteration", 0)
    total = state.get("mra_calls_total", 0)
    calls_left = max(0, ctx.mra_max_calls_total - total)
    dropped = state.get("mra_dropped_calls") or []
    notices = ""
    if dropped:
        notices = "Calls not run last round:\n" + "\n".join(f"- {_call_text(d)}: {d['reason']}" for d in dropped) + "\n"
    protocol, tools = _protocol(ctx)
    pieces = dict(question=state["question"], round=it + 1, max_rounds=ctx.mra_max_rounds,
                  calls_left=calls_left, per_round=min(ctx.mra_max_calls_per_round, calls_left),
                  seed=_seed_text(state.get("mra_seed") or {}), notices=notices, tools=tools, protocol=protocol,
                  answer_rules=load_prompt(P, "answer_rules"))
    fixed = estimate_tokens(render_prompt(P, "navigate", tool_log="", **pieces))
    log_budget = max(150, ctx.max_prompt_tokens - fixed)
    return render_prompt(P, "navigate", tool_log=_tool_log_text(state.get("mra_tool_log") or [], log_budget),
                         **pieces)


def navigate(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    it = state.get("iteration", 0) + 1
    prompt = navigate_prompt(state, ctx)
    model = get_chat_model(ctx)
    if ctx.mra_tool_protocol in ("auto", "native"):
        tools = structured_tools(ctx, state["namespace"], state["question"])
        bound = model.bind_tools(tools, tool_choice="auto", max_tokens=500)
    else:
        bound = _json_bound(model, ctx, NavigateJSON, 500)
    msg, usage = invoke_counted(bound, [HumanMessage(content=prompt)], "navigate")
    content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    tool_calls = [{"name": tc.get("name"), "args": tc.get("args")} for tc in (msg.tool_calls or [])]
    for bad in getattr(msg, "invalid_tool_calls", None) or []:  # unparsable native args still count as calls
        tool_calls.append({"name": bad.get("name"), "args": bad.get("args")})
    return {
        "iteration": it,
        "mra_raw_reply": {"content": content, "tool_calls": tool_calls},
        "usage": usage,
        "trace": emit("navigate", round=it, protocol=ctx.mra_tool_protocol, prompt_tokens=usage.get("prompt_tokens"),
                      native_calls=len(tool_calls), reply=content[:300]),
    }


# --------------------------------------------------------------------------------------------- route


def _apply_keep(
    state: MemoryState, g: CueTagGraph, keep: list[str], prune: list[str], reason: str | None, rnd: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The model's keep/prune decision on H (`critical_memories`); only visible turns can be kept."""
    visible = set(state.get("mra_visible_ids") or [])
    current = list(state.get("critical_memories") or [])
    have = {m["id"] for m in current}
    kept, ignored = [], []
    for ident in keep:
        tid = turn_of(ident)
        if tid is None or tid not in visible or tid not in g.turns:
            ignored.append(ident)
            continue
        if tid not in have:
            turn = g.turns[tid]
            current.append({"id": tid, "text": f"{turn.speaker}: {turn.full_text}", "round": rnd,
                            "why": reason or f"kept by the model in round {rnd}"})
            have.add(tid)
            kept.append(tid)
    pruned_ids = {turn_of(p) for p in prune} - {None}
    pruned = [m["id"] for m in current if m["id"] in pruned_ids]
    current = [m for m in current if m["id"] not in pruned_ids]
    info = {"kept": kept, "pruned": pruned, "keep_ignored": ignored}
    if ignored:
        info["keep_ignored_why"] = "not shown yet or not a turn/event id"
    return current, info


def route(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    rnd = state.get("iteration", 0)
    parsed = parse_reply(state.get("mra_raw_reply"))
    update: dict[str, Any] = {"mra_pending_calls": [], "mra_dropped_calls": []}
    info: dict[str, Any] = {"form": parsed["form"]}
    if parsed["keep"] or parsed["prune"]:
        crit, keep_info = _apply_keep(state, _graph(ctx, state["namespace"]), parsed["keep"], parsed["prune"],
                                      parsed["reason"], rnd)
        update["critical_memories"] = crit
        update["masks"] = keep_info["kept"]
        info.update(keep_info)

    if parsed["calls"]:
        previous = {call_key(e["tool"], e.get("args")): e["round"] for e in state.get("mra_tool_log") or []}
        left_total = max(0, ctx.mra_max_calls_total - state.get("mra_calls_total", 0))
        cap = min(ctx.mra_max_calls_per_round, left_total)
        pending: list[dict[str, Any]] = []
        dropped: list[dict[str, Any]] = []
        for i, c in enumerate(parsed["calls"], start=1):
            key = call_key(c["tool"], c["args"])
            if key in previous:
                dropped.append({**c, "reason": f"already called in round {previous[key]}; not run again"})
                continue
            if len(pending) >= cap:
                why = (f"over the per-round cap of {ctx.mra_max_calls_per_round}"
                       if cap == ctx.mra_max_calls_per_round else f"question budget of {ctx.mra_max_calls_total} calls spent")
                dropped.append({**c, "reason": why})
                continue
            previous[key] = rnd
            pending.append({"call_id": f"r{rnd}c{i}", "tool": c["tool"], "args": c["args"]})
        update["mra_pending_calls"] = pending
        update["mra_dropped_calls"] = dropped
        info.update(calls=[_call_text(p) for p in pending], dropped=[f"{_call_text(d)}: {d['reason']}" for d in dropped])

    if parsed["answer"] is not None and not update["mra_pending_calls"]:
        ans = parsed["answer"]
        update.update(draft_answer=ans["answer"].strip(), supports=ans["supports"], mra_confidence=ans["confidence"])
        edge = "answer"
    elif update["mra_pending_calls"]:
        edge = "tools"
    elif rnd >= ctx.mra_max_rounds - 1:
        update["mra_forced_final"] = True
        edge = "answer (forced: round budget)"
    else:
        edge = "navigate"
        if not parsed["calls"]:
            info["unusable"] = "no tool call and no answer in the reply"
    update["trace"] = emit("route", round=rnd, edge=edge, **info)
    return update


def after_route(state: MemoryState) -> Literal["answer", "tools", "navigate"]:
    if state.get("draft_answer"):
        return "answer"
    if state.get("mra_pending_calls"):
        return "tools"
    if state.get("mra_forced_final"):
        return "answer"
    return "navigate"


# --------------------------------------------------------------------------------------------- tools


def tools(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    g = _graph(ctx, state["namespace"])
    rnd = state.get("iteration", 0)
    tc = ToolContext(graph=g, question=state["question"], masks=set(state.get("masks") or []),
                     seen_cues=set(state.get("mra_seen_cues") or []), cfg=ctx)
    log, evidence, shown, visible, cues, calls = [], [], [], [], [], []
    for call in state.get("mra_pending_calls") or []:
        try:
            res = execute(call["tool"], call["args"], tc)
        except Exception as exc:  # a tool bug must not end the run; the model sees the error
            res = error_result(f"{call['tool']} failed: {type(exc).__name__}: {exc}")
        log.append({"round": rnd, "call_id": call["call_id"], "tool": call["tool"], "args": call["args"],
                    "result_ids": res.result_ids, "text": res.text, "error": res.error})
        evidence += res.evidence
        shown += res.shown_turns
        visible += [*res.visible_ids, *(s for o in res.shown_turns for s in g.sentences_of(o))]
        cues += res.cues
        calls.append({"call": _call_text(call), "error": res.error, "shown": res.shown_turns,
                      "already_shown": res.already_shown, "ids": res.result_ids[:20]})
    total = state.get("mra_calls_total", 0) + len(log)
    forced = rnd >= ctx.mra_max_rounds - 1 or total >= ctx.mra_max_calls_total
    why = None
    if forced:
        why = "round budget" if rnd >= ctx.mra_max_rounds - 1 else f"call budget ({total}/{ctx.mra_max_calls_total})"
    return {
        "mra_tool_log": log,
        "evidence": list(state.get("evidence") or []) + evidence,
        "masks": shown,
        "mra_visible_ids": visible,
        "mra_seen_cues": cues,
        "mra_calls_total": total,
        "mra_pending_calls": [],
        "mra_forced_final": forced,
        "retrieved": [{"id": t, "text": line} for t, line in zip(shown, evidence, strict=False)],
        "trace": emit("tools", round=rnd, executed=len(log), calls_total=total, results=calls,
                      next="answer (forced: " + why + ")" if why else "navigate", shown_turn_ids=shown),
    }


def after_tools(state: MemoryState) -> Literal["answer", "navigate"]:
    return "answer" if state.get("mra_forced_final") else "navigate"


def after_seed(state: MemoryState) -> Literal["answer", "navigate"]:
    return "answer" if state.get("mra_forced_final") else "navigate"


# --------------------------------------------------------------------------------------------- answer


def map_supports(cited: list[str], visible: list[str], g: CueTagGraph | None = None) -> list[str]:
    """Cited ids → turn ids (sentence → its turn; topic ids dropped), kept only if shown."""
    vis = set(visible)
    out: list[str] = []
    for ident in cited:
        tid = turn_of(str(ident))
        if tid is None or tid not in vis or (g is not None and tid not in g.turns):
            continue
        if tid not in out:
            out.append(tid)
    return out


def _tool_summary(log: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {_call_text(e)} -> {', '.join(e.get('result_ids') or []) or (e.get('error') or '-')}"
                     for e in log) or "(no tool calls)"


def answer(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    g = _graph(ctx, state["namespace"])
    draft = (state.get("draft_answer") or "").strip()
    usage: dict[str, Any] = {}
    note: dict[str, Any] = {}
    forced = not draft
    if draft:
        text, cited, conf = draft, list(state.get("supports") or []), state.get("mra_confidence")
    else:
        evidence = state.get("evidence") or []
        ev_text, used = [], 0
        for line in evidence:  # keep within the per-call prompt budget, earliest (seed) lines first
            cost = estimate_tokens(line)
            if used + cost > ctx.max_prompt_tokens - 600:
                break
            ev_text.append(line)
            used += cost
        prompt = render_prompt(P, "final_answer", question=state["question"], evidence="\n".join(ev_text) or "(none)",
                               tool_log=_tool_summary(state.get("mra_tool_log") or []),
                               answer_rules=load_prompt(P, "answer_rules"))
        # One call, no retry: the loop's LLM budget (max_rounds calls) includes this one.
        msg, usage = invoke_counted(_json_bound(get_chat_model(ctx), ctx, FinalReply, 200),
                                    [HumanMessage(content=prompt)], "answer")
        content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
        reply = None
        for obj in json_objects(content):
            try:
                reply = FinalReply.model_validate(obj)
                break
            except ValidationError:
                continue
        if reply is not None and reply.answer.strip():
            text, cited, conf = reply.answer.strip(), reply.supports, reply.confidence
        else:
            text, cited, conf = NO_INFO, [], None
            note = {"fallback": True, "raw": content[:300]}
        note["shown_turn_ids"] = [turn_of(line.split(": ", 1)[0]) for line in ev_text if turn_of(line.split(": ", 1)[0])]
    supports = map_supports(cited, state.get("mra_visible_ids") or [], g)
    if not supports and text and text != NO_INFO:
        # The model cited nothing usable: fall back to shown turns whose raw text contains the answer,
        # so a grounded answer still names its evidence (never a turn that was not shown).
        low = text.lower().strip(" .")
        supports = [t for t in state.get("masks") or [] if t in g.turns and low and low in g.turns[t].full_text.lower()][:3]
        if supports:
            note["supports_from"] = "shown turns containing the answer text"
    crit = []
    for tid in supports:
        turn = g.turns[tid]
        crit.append({"id": tid, "text": f"{turn.speaker}: {turn.full_text}", "date_time": turn.date_time,
                     "why": "cited in the answer"})
    for m in state.get("critical_memories") or []:  # memories the model kept along the way
        if m["id"] not in supports:
            crit.append(m)
    return {
        "answer": text or NO_INFO,
        "supports": supports,
        "critical_memories": crit,
        "mra_confidence": conf,
        "mra_forced_final": forced,
        "usage": usage,
        "trace": emit("answer", answer=text or NO_INFO, forced=forced, llm_call=forced, cited=cited,
                      supports=supports, dropped_citations=[c for c in cited if c not in supports],
                      confidence=conf, **note),
    }


# --------------------------------------------------------------------------------------------- graph

builder = StateGraph(MemoryState, context_schema=Context, input_schema=InputState, output_schema=OutputState)
builder.add_node("extract_cues", extract_cues)
builder.add_node("seed", seed)
builder.add_node("navigate", navigate)
builder.add_node("route", route)
builder.add_node("tools", tools)
builder.add_node("answer", answer)
builder.add_edge(START, "extract_cues")
builder.add_edge("extract_cues", "seed")
builder.add_conditional_edges("seed", after_seed, ["navigate", "answer"])
builder.add_edge("navigate", "route")
builder.add_conditional_edges("route", after_route, ["answer", "tools", "navigate"])
builder.add_conditional_edges("tools", after_tools, ["answer", "navigate"])
builder.add_edge("answer", END)

graph = builder.compile()
graph.name = "mragent"


def recursion_limit(ctx: Context) -> int:
    return 4 * ctx.mra_max_rounds + 10
