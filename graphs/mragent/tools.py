"""MRAgent's traversal tools: one registry of typed functions behind both tool protocols.

Each tool has a pydantic argument model and a function `(args, ToolContext) -> ToolResult`.
`execute` validates the arguments, runs the function and never raises on model mistakes (unknown
tool, bad arguments, unknown ids become an error result). The graph's `tools` node calls
`execute`; `structured_tools` wraps the same functions as LangChain `StructuredTool`s bound to a
namespace, which is what `bind_tools` advertises in the native protocol.

Masking rule (spec §3.4): a result never repeats the raw text of a turn already in `masks`; such
turns are listed by id under `already_shown`. Persona facts and topics are derived text, not
masked. A tool does not mask what it returns: a turn joins `masks` only when the navigate or
final prompt actually renders its line (recollect.graphs.mragent.prompting), so a result cut for lack of room
can be shown again later. Within one `tools` round the context remembers what earlier calls
returned, so two calls of a round never return the same turn twice. See specs/methods/mragent.md §3.4.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from recollect.graphs.mragent.memory import EVENTS_KIND, TOPIC_ID, cue_norm, cue_tokens, turn_of
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.store import CueTagGraph
from recollect.memory.embeddings import cosine_matrix
from recollect.prompts import load_prompt

TAGS_PER_CUE = 10


@dataclass
class ToolContext:
    """What a tool may read and the per-question bookkeeping it updates (masks, seen cues)."""

    graph: CueTagGraph
    question: str
    masks: set[str] = field(default_factory=set)  # rendered before this round, plus returned in this round
    seen_cues: set[str] = field(default_factory=set)  # normalised cue forms
    cfg: MRAgentContext = field(default_factory=MRAgentContext)


@dataclass
class ToolResult:
    """One call's result. `parts` is its text line by line, each raw-turn line tagged with its turn id,
    so a renderer can show it turn by turn and mask only the turns it showed."""

    text: str
    result_ids: list[str] = field(default_factory=list)  # ids the result names
    shown_turns: list[str] = field(default_factory=list)  # raw turns shown (→ masks, evidence)
    evidence: list[str] = field(default_factory=list)  # `<id>: <text>` lines of raw turns shown
    visible_ids: list[str] = field(default_factory=list)  # every id appearing in the text
    cues: list[str] = field(default_factory=list)  # normalised cues returned (→ mra_seen_cues)
    already_shown: list[str] = field(default_factory=list)
    error: str | None = None
    parts: list[tuple[str, str | None]] = field(default_factory=list)  # (line, turn id of a raw-turn line)

    def __post_init__(self) -> None:
        if not self.parts and self.text:
            self.parts = [(self.text, None)]


def error_result(message: str) -> ToolResult:
    return ToolResult(text=f"error: {message}", error=message)


_error = error_result


# --------------------------------------------------------------------------------------------- arguments


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, v: Any) -> Any:
        return v.strip() if isinstance(v, str) else v


class TagEventsArgs(_Args):
    cue: str = Field(min_length=1, description="a cue (keyword)", validation_alias=AliasChoices("cue", "keyword"))
    tag: str = Field(min_length=1, description="one of the cue's tags")


class EventIdArgs(_Args):
    event_id: str = Field(min_length=1, description="event id, e.g. D3:12 or D3:12-2",
                          validation_alias=AliasChoices("event_id", "id", "event"))


class EventContextArgs(EventIdArgs):
    window: int = Field(default=1, ge=1, le=5, description="turns on each side (1-5)")


class PersonArgs(_Args):
    person: str = Field(min_length=1, description="a person's name", validation_alias=AliasChoices("person", "name"))


class PersonAspectArgs(PersonArgs):
    aspect: str = Field(min_length=1, description="an aspect listed by query_personal_information")


class TopicArgs(_Args):
    topic: str = Field(min_length=1, description="topic id, e.g. D3:t2",
                       validation_alias=AliasChoices("topic", "topic_id", "id"))


# --------------------------------------------------------------------------------------------- helpers


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
        if turn_of(ident) is None:
            return _error(f"'{ident}' is not an event id; use {hint}")
        return _error(f"unknown event id '{ident}'; use {hint}")
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
    return _error(f"no personal information for '{person}' (known people: {known})")


@lru_cache(maxsize=4096)
def _embed_cached(emb_id: int, text: str) -> tuple[float, ...]:
    return tuple(_EMB[emb_id].embed_query(text))


_EMB: dict[int, Any] = {}


def _rank_tags(tc: ToolContext, tags: list[str]) -> list[str]:
    """Tags by embedding similarity to the question (deterministic, no LLM call: spec §6)."""
    emb = tc.graph.ws.embeddings
    _EMB[id(emb)] = emb
    vecs = np.asarray([_embed_cached(id(emb), t) for t in tags], dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms == 0, 1, norms)
    sims = cosine_matrix(list(_embed_cached(id(emb), tc.question)), vecs)
    order = sorted(range(len(tags)), key=lambda i: (-float(sims[i]), i))
    return [tags[i] for i in order]


# --------------------------------------------------------------------------------------------- tools


def query_tag_events(args: TagEventsArgs, tc: ToolContext) -> ToolResult:
    g = tc.graph
    norms = g.find_cues(args.cue, tc.cfg.mra_jaccard, exact=True) or g.find_cues(args.cue, tc.cfg.mra_jaccard)
    if not norms:
        return _error(f"cue '{args.cue}' is not in the memory graph; use a cue listed in the seed or by a tool")
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
        return _error(f"cue '{args.cue}' has no tag '{args.tag}' (its tags: {tags})")
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
        return _error(f"{name} has no aspect '{args.aspect}' (aspects: {', '.join(aspects) or 'none'})")
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
            return _error(f"'{args.topic}' is not a topic id; use an id like D3:t2 from the seed topics")
        return _error(f"unknown topic id '{args.topic}'")
    res = _events_listing(tc, list(topic["events"]), f"{args.topic}: {topic['text']}")
    res.visible_ids.insert(0, args.topic)
    return res


# --------------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args_model: type[BaseModel]
    fn: Callable[[Any, ToolContext], ToolResult]

    @property
    def description(self) -> str:
        return tool_descriptions().get(self.name, self.name)


REGISTRY: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        ToolSpec("query_tag_events", TagEventsArgs, query_tag_events),
        ToolSpec("query_conversation_time", EventIdArgs, query_conversation_time),
        ToolSpec("query_event_keywords", EventIdArgs, query_event_keywords),
        ToolSpec("query_event_context", EventContextArgs, query_event_context),
        ToolSpec("query_personal_information", PersonArgs, query_personal_information),
        ToolSpec("query_personal_aspect", PersonAspectArgs, query_personal_aspect),
        ToolSpec("query_topic_events", TopicArgs, query_topic_events),
    )
}


def tool_descriptions() -> dict[str, str]:
    out = {}
    for line in load_prompt("mragent", "tool_descriptions").splitlines():
        name, _, text = line.partition(":")
        if text:
            out[name.strip()] = text.strip()
    return out


def execute(name: str, args: Any, tc: ToolContext) -> ToolResult:
    """Run one call; unknown tools, bad arguments and unknown ids become error results."""
    spec = REGISTRY.get(str(name))
    if spec is None:
        return _error(f"unknown tool '{name}'; available: {', '.join(REGISTRY)}")
    if not isinstance(args, dict):
        return _error(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
    try:
        parsed = spec.args_model.model_validate(args)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}" for e in exc.errors()[:4])
        return _error(f"{name}: bad arguments ({why})")
    return spec.fn(parsed, tc)


def _arg_signature(model: type[BaseModel]) -> str:
    parts = []
    for fname, f in model.model_fields.items():
        default = "" if f.is_required() else f"={f.default}"
        parts.append(f"{fname}{default}")
    return ", ".join(parts)


def tool_catalog() -> str:
    """The tools as prompt lines for the JSON protocol: `name(arg, arg=default): description`."""
    return "\n".join(f"- {s.name}({_arg_signature(s.args_model)}): {s.description}" for s in REGISTRY.values())


def structured_tools(ctx: MRAgentContext, namespace: str, question: str = "") -> list[Any]:
    """The registry as LangChain `StructuredTool`s bound to a namespace (fresh masks per call)."""
    from langchain_core.tools import StructuredTool

    from recollect.memory.workspace import open_workspace

    def bind(spec: ToolSpec) -> Callable[..., str]:
        def run(**kwargs: Any) -> str:
            graph = CueTagGraph.load(open_workspace(ctx.data_dir), namespace)
            return execute(spec.name, kwargs, ToolContext(graph=graph, question=question, cfg=ctx)).text

        return run

    return [
        StructuredTool.from_function(func=bind(s), name=s.name, description=s.description, args_schema=s.args_model)
        for s in REGISTRY.values()
    ]


__all__ = ["EVENTS_KIND", "REGISTRY", "ToolContext", "ToolResult", "error_result", "execute", "structured_tools",
           "tool_catalog"]
