"""MRAgent's Cue–Tag–Content graph: the builder (ingestion); the read side is recollect.graphs.mragent.store.

Per session, in order, each *window* (the whole session when it fits `mra_ingest_window_tokens`)
gets two LLM calls: call A rewrites the turns into sentences with a tag, topics, an absolute time
and personal facts; call B copies cues verbatim out of each rewritten sentence. Both replies are
validated against the window (invented ids are dropped and reported), every turn is guaranteed
at least one event, and each call is cached by content hash, so a re-ingest makes no call.

`mra_ingest_format` picks the reply format: `compact` (default: positional arrays, local numbers,
"" for the session date; about 40% fewer generated tokens for the same content), `compact_merged`
(compact, with the cues written by call A: one call per window) or `json` (the spec's keyed
objects, unchanged). All three feed the same validation and build the same structures.

Persisted per namespace in `ws.docs` (kinds prefixed `mra_`), one transaction per session:
events, cues (cue → tag → events), topics, persona facts, the timeline and a session stamp; plus the
Chroma collections `mragent_events` (rewritten sentences) and `mragent_topics`. See
specs/methods/mragent.md §2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.llm.cache import LLMCache, cache_key
from recollect.llm.lenient import StrList, Text, as_text
from recollect.llm.models import get_chat_model, model_name
from recollect.llm.structured import call_structured
from recollect.llm.usage import estimate_tokens
from recollect.memory.vectors import Unit
from recollect.memory.workspace import Workspace
from recollect.prompts import render_prompt

METHOD = "mragent"
EVENTS_KIND = "mragent_events"
TOPICS_KIND = "mragent_topics"
K_EVENT, K_CUE, K_TOPIC, K_PERSONA, K_SESSION, K_META = (
    "mra_event", "mra_cue", "mra_topic", "mra_persona", "mra_session", "mra_meta",
)
OTHER_TAG = "Other"
MAX_CUES = 30
FALLBACK_CUES = 8
EVENT_ID = re.compile(r"^(D\d+:\d+)-(\d+)$")
TURN_ID = re.compile(r"^D(\d+):(\d+)$")
TOPIC_ID = re.compile(r"^D\d+:t\d+$")
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_TOKEN = re.compile(r"[a-z0-9]+")

_STOPWORD_TEXT = """a an the and or but if then so of to in on at by for with from about as into over after before
    is are was were be been being am do does did done have has had having i me my mine we us our you your
    he him his she her hers it its they them their this that these those there here what which who whom
    whose when where why how not no yes can could will would shall should may might must just also very
    really too than some any all each every much many more most other such own same only s t don
    oh hey hi hello yeah ok okay wow thanks thank so get got gonna like lot lots"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


# --------------------------------------------------------------------------------------------- helpers


def cue_tokens(text: str) -> frozenset[str]:
    """The normalised token set of a cue: lower case, alphanumeric tokens, stopwords dropped
    (unless the cue is made only of stopwords, so it still has a form)."""
    toks = _TOKEN.findall((text or "").lower())
    content = [t for t in toks if t not in STOPWORDS]
    return frozenset(content or toks)


def cue_norm(text: str) -> str:
    """The snake_case key of a cue's token set: the one normalisation used for cues and tags."""
    return "_".join(sorted(cue_tokens(text)))


def cue_relation(a: frozenset[str], b: frozenset[str], jaccard: float) -> str | None:
    """How two cue token sets relate: `equal`, `contain`, `jaccard`, or None (no match)."""
    if not a or not b:
        return None
    if a == b:
        return "equal"
    if a <= b or b <= a:
        return "contain"
    if len(a & b) / len(a | b) >= jaccard - 1e-9:
        return "jaccard"
    return None


def fallback_cues(text: str, limit: int = FALLBACK_CUES) -> list[str]:
    """Non-stopword tokens of at least 3 characters, in order, deduplicated. A contraction of a
    stopword ("I'm", "it's", "don't") counts as a stopword."""
    out: list[str] = []
    for tok in re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", text or ""):
        low = tok.lower().strip("'-")
        if low.split("'")[0] in STOPWORDS:  # covers the plain stopword too ("the".split("'")[0] == "the")
            continue
        if len(low) >= 3 and low not in (o.lower() for o in out):
            out.append(tok.strip("'-"))
        if len(out) >= limit:
            break
    return out


def parse_iso(text: Any) -> date | None:
    m = _ISO.search(str(text or ""))
    if not m:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def normalise_time(text: Any, session_date: str) -> str:
    """An absolute YYYY-MM-DD; a range of two dates becomes its midpoint; anything else the session date."""
    found = []
    for m in _ISO.finditer(str(text or "")):
        try:
            found.append(date(int(m[1]), int(m[2]), int(m[3])))
        except ValueError:
            continue
    if not found:
        return session_date
    if len(found) >= 2:
        a, b = sorted(found[:2])
        return date.fromordinal((a.toordinal() + b.toordinal()) // 2).isoformat()
    return found[0].isoformat()


def session_date(session: Session) -> str:
    """The session's day as YYYY-MM-DD ('' when the date-time cannot be parsed)."""
    parsed: datetime | None = session.parsed
    if parsed is None:
        from recollect.dialogue.loaders import parse_session_datetime

        parsed = parse_session_datetime(session.date_time, allow_iso=True)
    return parsed.date().isoformat() if parsed else ""


def turn_of(event_or_turn: str) -> str | None:
    """`D3:12-2` → `D3:12`; `D3:12` → `D3:12`; anything else → None."""
    s = (event_or_turn or "").strip()
    m = EVENT_ID.match(s)
    if m:
        return m[1]
    return s if TURN_ID.match(s) else None


# --------------------------------------------------------------------------------------------- schemas
#
# Two reply formats (`MRAgentContext.mra_ingest_format`), one validated value. `json` is the spec's keyed
# objects (prompts rewrite.md / keywords.md, schema = the pydantic models below). `compact` drops
# the repeated keys: positional arrays, local numbers instead of ids, "" for the session date, topics as
# a plain list (prompts rewrite_compact.md / cues_compact.md). `compact_merged` also puts each
# sentence's cues into call A (prompt rewrite_merged.md), so a window needs one call. Parsing is
# lenient in every mode: the before-validators turn arrays into the keyed form, so a small model
# that answers in the other shape still parses, and everything downstream reads one structure.

SENTENCE_FIELDS = ("origin", "text", "tag", "topics", "time", "cues")  # the compact sentence array
FACT_FIELDS = ("origin", "person", "aspect", "text")  # the compact personal-fact array
DATE_PATTERN = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$"
# Caps of the compact schemas. They only shape the schema sent to the endpoint (a grammar on
# llama.cpp), where a small model may otherwise repeat an item or a phrase until max_tokens;
# validation does not enforce them (graphs/memr3.py caps its router schema the same way).
CAP_TOPICS, CAP_SENTENCES, CAP_FACTS, CAP_CUE_ROWS = 10, 120, 30, 120
CAP_TEXT, CAP_TAG, CAP_TOPIC, CAP_PERSON, CAP_FACT, CAP_CUE = 300, 30, 60, 40, 200, 60


def _positional(item: Any, names: tuple[str, ...]) -> Any:
    """A positional array → the keyed object (extra elements ignored); anything else unchanged."""
    if isinstance(item, list | tuple):
        return dict(zip(names, item, strict=False))
    return item


class RewriteSentence(BaseModel):
    id: Text = ""
    origin: Text = ""
    text: Text = ""
    tag: Text = ""
    topics: list[str] = Field(default_factory=list)
    time: Text = ""
    # Only the compact_merged reply carries cues here; left out of the spec's (json) schema.
    cues: SkipJsonSchema[StrList] = Field(default_factory=list)

    @field_validator("topics", mode="before")
    @classmethod
    def _topics(cls, v: Any) -> Any:
        if v is None or v == "None":
            return []
        if isinstance(v, int | str) and not isinstance(v, bool) and str(v).strip().isdigit():
            return [str(v).strip()]  # one topic number instead of a list of them
        if isinstance(v, str):
            return [x.strip() for x in re.split(r"[,\s]+", v) if x.strip()]
        return [as_text(x) for x in v] if isinstance(v, list) else v


class PersonalFact(BaseModel):
    person: Text = ""
    aspect: Text = ""
    text: Text = ""
    origin: Text = ""


class RewriteReply(BaseModel):
    """Call A: the window rewritten into sentences with tag, topics and time, plus personal facts."""

    # The docstring is the schema's description, so it stays as the spec's (json) schema had it. The
    # validation also reads the compact shapes: sentence arrays [origin, text, tag, topics, time(, cues)],
    # fact arrays [origin, person, aspect, fact], `facts` for `personal_facts`, a topic list.

    conversation_time: Text = ""
    sentences: list[RewriteSentence]
    topics: dict[str, str] = Field(default_factory=dict)
    personal_facts: list[PersonalFact] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _compact_keys(cls, v: Any) -> Any:
        if isinstance(v, dict) and "facts" in v and "personal_facts" not in v:
            v = {**v, "personal_facts": v["facts"]}
        return v

    @field_validator("sentences", mode="before")
    @classmethod
    def _sentence_items(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [_positional(x, SENTENCE_FIELDS) for x in v if isinstance(x, dict | list | tuple)]
        return v

    @field_validator("topics", mode="before")
    @classmethod
    def _topic_map(cls, v: Any) -> Any:
        if v is None or v == "None":
            return {}
        if isinstance(v, list):  # [{"id": "t1", "text": "..."}] or ["...", ...] (compact: position = number)
            out: dict[str, str] = {}
            for i, item in enumerate(v, start=1):
                if isinstance(item, dict):
                    key = as_text(item.get("id") or f"t{i}")
                    out[key] = as_text(item.get("text") or item.get("description") or "")
                else:
                    out[f"t{i}"] = as_text(item)
            return out
        if isinstance(v, dict):
            return {as_text(k): as_text(x) for k, x in v.items()}
        return v

    @field_validator("personal_facts", mode="before")
    @classmethod
    def _facts(cls, v: Any) -> Any:
        if v is None or v == "None":
            return []
        if not isinstance(v, list):
            return v
        out = []
        for x in v:
            x = _positional(x, FACT_FIELDS)
            if isinstance(x, dict):
                out.append({**x, "text": x["fact"]} if "fact" in x and "text" not in x else x)
        return out


class CueItem(BaseModel):
    id: Text
    cues: StrList = Field(default_factory=list)


class CueReply(BaseModel):
    """Call B: verbatim cues per rewritten sentence."""

    # Also read: the compact rows {"cues": [["<number>", "cue", ...], ...]} and {"<id>": [cues]}.

    sentences: list[CueItem]

    @model_validator(mode="before")
    @classmethod
    def _compact_rows(cls, v: Any) -> Any:
        if isinstance(v, dict) and "sentences" not in v and "cues" in v:
            v = {**v, "sentences": v["cues"]}
        return v

    @field_validator("sentences", mode="before")
    @classmethod
    def _items(cls, v: Any) -> Any:
        if isinstance(v, dict):  # {"D1:1-1": ["a", "b"]}
            return [{"id": k, "cues": x} for k, x in v.items()]
        if isinstance(v, list):  # [{"id", "cues"}] or compact rows ["<id>", "cue", ...]
            return [{"id": x[0], "cues": list(x[1:])} if isinstance(x, list | tuple) else x
                    for x in v if isinstance(x, dict | CueItem) or (isinstance(x, list | tuple) and x)]
        return v


def _text_schema(max_len: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_len}


def _list_schema(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


def _row_schema(*items: dict[str, Any]) -> dict[str, Any]:
    """A fixed-length positional array (JSON Schema `prefixItems`, as pydantic writes a tuple)."""
    return {"type": "array", "prefixItems": list(items), "minItems": len(items), "maxItems": len(items)}


def compact_rewrite_schema(with_cues: bool) -> dict[str, Any]:
    """The JSON schema call A sends in the compact formats. Every key is required, so a grammar
    writes them in this order: topics first, since the sentences refer to them by number."""
    number = {"type": "integer"}
    sentence = [number, _text_schema(CAP_TEXT), _text_schema(CAP_TAG), _list_schema(number, 3),
                {"type": "string", "pattern": DATE_PATTERN}]
    if with_cues:
        sentence.append(_list_schema(_text_schema(CAP_CUE), MAX_CUES))
    fact = _row_schema(number, _text_schema(CAP_PERSON), _text_schema(CAP_TAG), _text_schema(CAP_FACT))
    return {
        "title": "RewriteMerged" if with_cues else "RewriteCompact",
        "type": "object",
        "properties": {
            "topics": _list_schema(_text_schema(CAP_TOPIC), CAP_TOPICS),
            "sentences": _list_schema(_row_schema(*sentence), CAP_SENTENCES),
            "facts": _list_schema(fact, CAP_FACTS),
        },
        "required": ["topics", "sentences", "facts"],
    }


def compact_cue_schema() -> dict[str, Any]:
    """The JSON schema call B sends in the compact format: one row per sentence, its number then its cues."""
    row = {"type": "array", "items": _text_schema(CAP_CUE), "minItems": 2, "maxItems": MAX_CUES + 1}
    return {"title": "CuesCompact", "type": "object",
            "properties": {"cues": _list_schema(row, CAP_CUE_ROWS)}, "required": ["cues"]}


class CompactRewriteReply(RewriteReply):
    """Call A in the `compact` format: validated like `RewriteReply`, with the compact schema sent."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return compact_rewrite_schema(with_cues=False)


class MergedRewriteReply(RewriteReply):
    """Call A in the `compact_merged` format: each sentence array ends with its cues."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return compact_rewrite_schema(with_cues=True)


class CompactCueReply(CueReply):
    """Call B in the `compact` format: validated like `CueReply`, with the compact schema sent."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return compact_cue_schema()


# --------------------------------------------------------------------------------------------- windows


def render_turn_line(turn: Turn) -> str:
    return f"{turn.id} | {turn.speaker}: {turn.full_text}"


def windows(session: Session, max_tokens: int) -> list[list[Turn]]:
    """Consecutive turn windows whose rendered text fits `max_tokens` (a long turn stands alone)."""
    out: list[list[Turn]] = []
    buf: list[Turn] = []
    size = estimate_tokens(session.date_time)
    base = size
    for turn in session.turns:
        cost = estimate_tokens(render_turn_line(turn))
        if buf and size + cost > max_tokens:
            out.append(buf)
            buf, size = [], base
        buf.append(turn)
        size += cost
    if buf:
        out.append(buf)
    return out


# --------------------------------------------------------------------------------------------- validation


@dataclass
class WindowResult:
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cues: dict[str, list[str]] = field(default_factory=dict)  # event id → cues written by call A (compact_merged)


def validate_rewrite(
    reply: RewriteReply | None, window: list[Turn], sdate: str, topic_start: int, session_index: int,
    numbers: dict[str, str] | None = None,
) -> WindowResult:
    """Apply call A's validation: origins in the window, ids renormalised, times, tags, topics,
    and one fallback sentence for every turn the model left out.

    `numbers` (the compact formats) maps the turn numbers shown in the prompt to turn ids; an origin
    may then be a number or a turn id, and a topic reference a topic's number."""
    res = WindowResult()
    by_id = {t.id: t for t in window}
    topic_map: dict[str, str] = {}
    if reply is not None:
        for n, (tid, text) in enumerate(((k, v) for k, v in reply.topics.items() if v.strip()), start=topic_start):
            if n - topic_start >= 10:  # at most 10 topics per window; a small model pads with filler
                break
            gid = f"D{session_index}:t{n}"
            topic_map[tid.strip()] = gid
            res.topics[gid] = {"text": text.strip(), "events": []}
    counters: dict[str, int] = {}
    produced: dict[str, list[dict[str, Any]]] = {t.id: [] for t in window}
    if reply is not None:
        invented = []
        for s in reply.sentences:
            origin = s.origin or (turn_of(s.id) or "")
            if numbers is not None and origin not in by_id:
                origin = numbers.get(origin, origin)
            if origin not in by_id:
                invented.append(origin or s.id or "?")
                continue
            if not s.text:
                continue
            refs = s.topics if numbers is None else [t if t in topic_map else f"t{t}" for t in s.topics]
            topics = [topic_map[t] for t in refs if t in topic_map]
            produced[origin].append({"text": s.text, "tag": " ".join(s.tag.split()[:2]) or OTHER_TAG,
                                     "time": normalise_time(s.time, sdate), "topics": topics, "cues": s.cues})
        if invented:
            res.notes.append(f"rewrite: dropped sentences with unknown origin {sorted(set(invented))}")
    missing = [tid for tid, items in produced.items() if not items]
    if reply is not None and missing:
        res.notes.append(f"rewrite: {len(missing)} turn(s) without a sentence got a fallback: {missing}")
    for turn in window:
        items = produced[turn.id] or [{"text": turn.full_text, "tag": OTHER_TAG, "time": sdate, "topics": [],
                                       "cues": []}]
        for item in items:
            counters[turn.id] = counters.get(turn.id, 0) + 1
            eid = f"{turn.id}-{counters[turn.id]}"
            res.events[eid] = {
                "origin": turn.id,
                "speaker": turn.speaker,
                "content": turn.full_text,  # raw turn text (with caption): what the agent is shown
                "rewritten": item["text"],  # embedded and used for cue extraction only
                "tag": item["tag"],
                "time": item["time"],
                "session_date": sdate,
                "session": session_index,
                "topics": item["topics"],
                "cues": [],
            }
            for gid in item["topics"]:
                res.topics[gid]["events"].append(eid)
            if item["cues"]:
                res.cues[eid] = list(item["cues"])
    if reply is not None:
        for f in reply.personal_facts:
            origin = f.origin if numbers is None or f.origin in by_id else numbers.get(f.origin, f.origin)
            if origin in by_id and f.person and f.text:
                res.facts.append({"person": f.person, "aspect": f.aspect or "general", "fact": f.text,
                                  "origin": origin})
            elif f.text:
                res.notes.append(f"rewrite: dropped personal fact with unknown origin {f.origin!r}")
    return res


def apply_cues(reply: CueReply | None, events: dict[str, dict[str, Any]], accept_turn_ids: bool = True,
               numbers: dict[str, str] | None = None, fallback_limit: int = FALLBACK_CUES) -> list[str]:
    """Call B's validation: unknown ids dropped, non-verbatim cues discarded, at most 30 kept,
    fallback tokens (at most `fallback_limit`) for a sentence left without cues, and the speaker's
    name always added.

    `numbers` (the compact format) maps the sentence numbers shown in the prompt to event ids."""
    notes: list[str] = []
    got: dict[str, list[str]] = {}
    if reply is not None:
        by_origin: dict[str, list[str]] = {}
        for eid, ev in events.items():
            by_origin.setdefault(ev["origin"], []).append(eid)
        # A small model often answers with the turn id ("D1:3") instead of its sentence ids
        # ("D1:3-1"): such a reply is read as covering that turn's sentences, and the verbatim check
        # below still decides, per sentence, which cues stand.
        # (`accept_turn_ids=False` is the spec's strict reading: such ids are unknown and dropped.)
        numbers = numbers or {}

        def targets(item_id: str) -> list[str]:
            if item_id in events:
                return [item_id]
            if item_id in numbers:
                return [numbers[item_id]]
            return by_origin.get(item_id, []) if accept_turn_ids else []

        resolved = [(item, targets(item.id)) for item in reply.sentences]
        unknown = [item.id for item, eids in resolved if not eids]
        if unknown:
            notes.append(f"keywords: dropped cues for unknown sentence ids {unknown}")
        by_turn = [item.id for item, eids in resolved if eids and item.id not in events and item.id not in numbers]
        if by_turn:
            notes.append(f"keywords: {len(by_turn)} reply id(s) named a turn, read as its sentences")
        discarded = 0
        for item, eids in resolved:
            cues = [" ".join(cue.split()) for cue in item.cues]
            placed: set[str] = set()
            for eid in eids:
                low = events[eid]["rewritten"].lower()
                keep: list[str] = []
                for c in cues:
                    if c and c.lower() in low and c.lower() not in (k.lower() for k in keep):
                        keep.append(c)
                        placed.add(c.lower())
                got.setdefault(eid, []).extend(keep[: MAX_CUES - len(got.get(eid, []))])
            if eids:
                discarded += sum(1 for c in cues if c.lower() not in placed or not c)
        if discarded:
            notes.append(f"keywords: discarded {discarded} cue(s) not found verbatim in their sentence")
    fallback = []
    for eid, ev in events.items():
        cues = got.get(eid) or []
        if not cues:
            cues = fallback_cues(ev["rewritten"], fallback_limit)
            fallback.append(eid)
        if ev["speaker"] and ev["speaker"].lower() not in (c.lower() for c in cues):
            cues = [*cues, ev["speaker"]]
        ev["cues"] = cues
    if fallback and reply is not None:
        notes.append(f"keywords: fallback tokens for {len(fallback)} sentence(s) without valid cues")
    return notes


# --------------------------------------------------------------------------------------------- builder


def _temperature(model: Any) -> float:
    t = getattr(model, "temperature", None)
    return float(t) if isinstance(t, int | float) else 0.0


def _cached_call(
    cache: LLMCache, key: str, model: Any, msgs: list, schema: type[BaseModel], node: str, ctx: MRAgentContext,
    max_tokens: int, report: Any,
) -> tuple[Any, str | None]:
    """A cached structured call: returns (validated value or None, failure note)."""
    hit = cache.get(key)
    if hit is not None:
        report.cached_calls += 1
        if not hit.get("ok"):
            return None, hit.get("error") or "cached failure"
        return schema.model_validate(hit["value"]), None
    res = call_structured(model, msgs, schema, node=node, method=ctx.structured_method, max_tokens=max_tokens)
    report.add_usage(res.usage)
    if res.ok:
        cache.put(key, {"ok": True, "value": res.value.model_dump()})  # type: ignore[union-attr]
        return res.value, None
    # A failure is cached too, so a re-ingest stays free; an edited prompt changes the key and retries.
    cache.put(key, {"ok": False, "error": res.error})
    return None, res.error


@dataclass(frozen=True)
class IngestFormat:
    """One value of `mra_ingest_format`: the prompts (= cache call names), the reply schemas, and the
    completion caps `(base, per turn or sentence, ceiling)` of call A and call B."""

    rewrite: str
    rewrite_schema: type[RewriteReply]
    cues: str
    cue_schema: type[CueReply]
    numbered: bool  # the prompts show local numbers (turn index, sentence position) instead of ids
    merged: bool  # call A also writes the cues; call B only runs when it brought none
    rewrite_cap: tuple[int, int, int]
    cue_cap: tuple[int, int, int]


FORMATS = {
    "json": IngestFormat("rewrite", RewriteReply, "keywords", CueReply, False, False, (200, 140, 2400), (120, 70, 2400)),
    "compact": IngestFormat("rewrite_compact", CompactRewriteReply, "cues_compact", CompactCueReply, True, False,
                            (120, 90, 1600), (60, 45, 1600)),
    "compact_merged": IngestFormat("rewrite_merged", MergedRewriteReply, "cues_compact", CompactCueReply, True, True,
                                   (150, 150, 2400), (60, 45, 1600)),
}


def lexical_cues(ctx: MRAgentContext) -> bool:
    """Whether sentences take their content words as cues with no call B (`mra_ingest_cues`); the
    merged format's cues come with call A, so the setting does not apply to it."""
    return ctx.mra_ingest_cues == "lexical" and not FORMATS[ctx.mra_ingest_format].merged


def _cap(cap: tuple[int, int, int], n: int) -> int:
    base, per, ceiling = cap
    return min(ceiling, base + per * n)


def _build_session(
    ws: Workspace, namespace: str, session: Session, ctx: MRAgentContext, cache: LLMCache, report: Any
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    from langchain_core.messages import HumanMessage

    model = get_chat_model(ctx)
    mname, temp = model_name(model), _temperature(model)
    fmt = FORMATS[ctx.mra_ingest_format]
    sdate = session_date(session)
    events: dict[str, dict[str, Any]] = {}
    topics: dict[str, dict[str, Any]] = {}
    facts: list[dict[str, Any]] = []
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
        msgs_a = [HumanMessage(content=render_prompt(METHOD, fmt.rewrite, date_time=session.date_time,
                                                     session_date=sdate or "unknown", turns=turns_text))]
        reply_a, err_a = _cached_call(
            cache, cache_key(namespace, METHOD, fmt.rewrite, mname, temp, payload_a), model, msgs_a,
            fmt.rewrite_schema, "mragent_rewrite", ctx, _cap(fmt.rewrite_cap, len(window)), report,
        )
        if reply_a is None:
            report.fallbacks.append(f"{where}: rewrite failed ({(err_a or '')[:120]}); one raw sentence per turn")
        res = validate_rewrite(reply_a, window, sdate, topic_next, session.index, turn_numbers)
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
            reply_b, err_b = _cached_call(
                cache, cache_key(namespace, METHOD, fmt.cues, mname, temp, payload_b), model, msgs_b,
                fmt.cue_schema, "mragent_keywords", ctx, _cap(fmt.cue_cap, len(res.events)), report,
            )
            if reply_b is None:
                report.fallbacks.append(f"{where}: cue extraction failed ({(err_b or '')[:120]}); token fallback")
        report.fallbacks.extend(f"{where}: {n}" for n in apply_cues(reply_b, res.events, ctx.mra_cues_accept_turn_ids,
                                                                     sentence_numbers, fallback_limit))
        events.update(res.events)
        topics.update(res.topics)
        facts.extend(res.facts)
    return events, topics, facts


def _rebuild_indexes(ws: Workspace, namespace: str) -> None:
    """Recompute the cue index, persona map and timeline from all events (cheap, always consistent)."""
    events = ws.docs.items(namespace, K_EVENT)
    cues: dict[str, dict[str, Any]] = {}
    timeline: dict[str, list[str]] = {}
    for eid, ev in events.items():
        for cue in ev.get("cues") or []:
            norm = cue_norm(cue)
            if not norm:
                continue
            entry = cues.setdefault(norm, {"cue": cue, "tokens": sorted(cue_tokens(cue)), "tags": {}})
            tag_key = ev.get("tag") or OTHER_TAG
            bucket = entry["tags"].setdefault(tag_key, [])
            if eid not in bucket:
                bucket.append(eid)
        timeline.setdefault(ev.get("time") or "", []).append(eid)
    persona: dict[str, dict[str, list[dict[str, str]]]] = {}
    for raw in ws.docs.items(namespace, K_SESSION).values():
        for f in raw.get("facts") or []:
            person = persona.setdefault(f["person"], {})
            person.setdefault(f["aspect"], []).append({"origin": f["origin"], "fact": f["fact"]})
    with ws.docs.transaction():
        ws.docs.delete_kind(namespace, K_CUE)
        ws.docs.put_many(namespace, K_CUE, cues)
        ws.docs.delete_kind(namespace, K_PERSONA)
        ws.docs.put_many(namespace, K_PERSONA, persona)
        ws.docs.put(namespace, K_META, "timeline", dict(sorted(timeline.items())))
        ws.docs.put(namespace, K_META, "version", {"events": len(events), "stamp": _stamp(ws, namespace)})


def _stamp(ws: Workspace, namespace: str) -> str:
    import hashlib

    hashes = [v.get("hash", "") for v in ws.docs.items(namespace, K_SESSION).values()]
    return hashlib.sha256("".join(sorted(hashes)).encode()).hexdigest()[:16]


def _session_hash(session: Session, ctx: MRAgentContext) -> str:
    """The session stamp: a session is rebuilt when its content, window size, reply format or cue
    source changes (the stamps keep their earlier form for the json format and for LLM cues, so graphs
    built before those settings stay valid). A rebuild reads call A from the LLM cache."""
    base = f"{session.content_hash()}:{ctx.mra_ingest_window_tokens}"
    if ctx.mra_ingest_format != "json":
        base = f"{base}:{ctx.mra_ingest_format}"
    if lexical_cues(ctx):
        base = f"{base}:lexical"
    return base


def build(ws: Workspace, namespace: str, conversation: Conversation, ctx: MRAgentContext, progress: Any) -> Any:
    """Build or extend the namespace's Cue–Tag–Content graph (idempotent, incremental, crash-safe)."""
    from recollect.memory.build import BuildReport

    report = BuildReport(METHOD)
    cache = LLMCache(ws.docs)
    done = ws.docs.items(namespace, K_SESSION)
    todo = [s for s in conversation.sessions if (done.get(str(s.index)) or {}).get("hash") != _session_hash(s, ctx)]
    ev_index, tp_index = ws.index(EVENTS_KIND, namespace), ws.index(TOPICS_KIND, namespace)
    changed = False
    for session in progress(todo, "mragent"):
        events, topics, facts = _build_session(ws, namespace, session, ctx, cache, report)
        old = done.get(str(session.index)) or {}
        stale_events = sorted(set(old.get("events") or []) - set(events))
        stale_topics = sorted(set(old.get("topics") or []) - set(topics))
        turns = {eid: ev["origin"] for eid, ev in events.items()}
        event_units = [
            Unit(id=eid, text=ev["rewritten"], turn_ids=[ev["origin"]],
                 metadata={"origin": ev["origin"], "tag": ev["tag"], "time": ev["time"], "session": session.index})
            for eid, ev in events.items()
        ]
        topic_units = [
            Unit(id=gid, text=tp["text"], turn_ids=sorted({turns[e] for e in tp["events"]}),
                 metadata={"session": session.index})
            for gid, tp in topics.items()
        ]
        # Vectors first (idempotent upserts), then the docs in one transaction: a crash in between
        # leaves the session unstamped, and the next run redoes it from the LLM cache.
        ev_index.delete(stale_events)
        tp_index.delete(stale_topics)
        report.embedded += ev_index.upsert(event_units) + tp_index.upsert(topic_units)
        with ws.docs.transaction() as conn:
            for eid in stale_events:
                conn.execute("DELETE FROM docs WHERE namespace=? AND kind=? AND key=?", (namespace, K_EVENT, eid))
            for gid in stale_topics:
                conn.execute("DELETE FROM docs WHERE namespace=? AND kind=? AND key=?", (namespace, K_TOPIC, gid))
            ws.docs.put_many(namespace, K_EVENT, events)
            ws.docs.put_many(namespace, K_TOPIC, topics)
            ws.docs.put(namespace, K_SESSION, str(session.index), {
                "hash": _session_hash(session, ctx), "date": session_date(session), "date_time": session.date_time,
                "events": list(events), "topics": list(topics), "facts": facts,
            })
        report.sessions += 1
        changed = True
        _rebuild_indexes(ws, namespace)
    if not changed and ws.docs.get(namespace, K_META, "version") is None and done:
        _rebuild_indexes(ws, namespace)
    return report


def __getattr__(name: str) -> Any:
    """`CueTagGraph` moved to recollect.graphs.mragent.store (the read side); this keeps the old import path."""
    if name == "CueTagGraph":
        from recollect.graphs.mragent.store import CueTagGraph

        return CueTagGraph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
