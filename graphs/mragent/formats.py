"""MRAgent's ingestion reply formats: the reply schemas of call A (rewrite) and call B (cues) and the compact
JSON schemas sent to the endpoint (which calls each setting makes: ingest_formats.py).

graphs/mragent/DESIGN.md shows the three formats side by side; README.md in this folder says what each call does.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from recollect.graphs.mragent.cues import MAX_CUES
from recollect.llm.lenient import StrList, Text, as_text

# Two reply formats (`MRAgentContext.mra_ingest_format`), one validated value. `json` is the spec's keyed
# objects (prompts rewrite.md / keywords.md, schema = the pydantic models below). `compact` drops
# the repeated keys: positional arrays, local numbers instead of ids, "" for the session date, topics as
# a plain list (prompts rewrite_compact.md / cues_compact.md). `compact_merged` also puts each
# sentence's cues into call A (prompt rewrite_merged.md), so a window needs one call. Parsing is
# lenient in every mode: the before-validators turn arrays into the keyed form, so a small model
# that answers in the other shape still parses, and everything downstream reads one structure.
# `mra_ingest_sentences="turn"` (compact only) replaces call A by `TURNS_FORMAT`: one row per turn with no
# sentence (prompt rewrite_turns.md); each turn's own text is then its event's sentence (validation.py).
# With `mra_turn_labels="derived"` (`TOPICS_FORMAT`, prompt rewrite_topics.md) a row is only the turn's topic
# numbers: its tag is its first topic and its date the day its text names (validation.py).

SENTENCE_FIELDS = ("origin", "text", "tag", "topics", "time", "cues")  # the compact sentence array
FACT_FIELDS = ("origin", "person", "aspect", "text")  # the compact personal-fact array
TURN_FIELDS = ("origin", "tag", "topics", "time")  # the turn-row array of before 2026-11-28 (still read)
TURN_ROW_FIELDS = ("tag", "topics")  # a turn row (mra_ingest_sentences="turn"): its place names its turn
TIME_FIELDS = ("origin", "time")  # a row of `times`: a turn number and the day it speaks of
DATE_PATTERN = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$"
DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# Caps of the compact schemas. They only shape the schema sent to the endpoint (a grammar on
# llama.cpp), where a small model may otherwise repeat an item or a phrase until max_tokens;
# validation does not enforce them (graphs/memr3/ caps its router schema the same way).
CAP_TOPICS, CAP_SENTENCES, CAP_FACTS, CAP_CUE_ROWS = 10, 120, 30, 120
CAP_TEXT, CAP_TAG, CAP_TOPIC, CAP_PERSON, CAP_FACT, CAP_CUE = 300, 30, 60, 40, 200, 60
# The turn rows' schema (mra_ingest_sentences="turn") is bounded by its window: one row per turn, numbers of
# the window's turns only, and a few short facts. Unbounded, the 1.5B model's replies ran on to max_tokens on
# this runtime (1266 generated tokens per LoCoMo session, 154 s): it kept copying turns into facts, up to 30
# of 200 characters each, and a grammar lets a row list go on past the last turn.
TURN_TOPICS, TURN_FACT_CHARS, TURNS_PER_FACT = 6, 100, 5
# A turn row is [tag, topic numbers]: its place in `turns` is its turn, and a date is written only for a turn
# that speaks of a day, in `times`. With a turn number and a date in every row the model wrote the session
# date into every row (about 12 of a row's ~25 generated tokens on Qwen's digit-per-token vocabulary, the
# same for all rows of a session: no information), and half the builder's seconds went to it.
TURNS_PER_TIME = 4


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


class TurnTime(BaseModel):
    """A row of `times`: the turn (its number in the session) and the day it speaks of."""

    origin: Text = ""
    time: Text = ""


class TurnRewriteReply(RewriteReply):
    """Call A with `mra_ingest_sentences="turn"`: under `turns` a row per turn in order, [tag, topic numbers],
    its place naming its turn (`first_turn` is the first row's); under `times` the turns that speak of a day;
    no sentence text. Validated like `RewriteReply` with each turn's text as its sentence.

    Also read: rows that name their turn ([turn number, tag, topics, date], the format of before), the rows
    under `sentences`, and a sentence row of the compact format (five or more elements, its sentence
    ignored), so a model that writes the sentences anyway still gives its tags and dates."""

    first_turn: ClassVar[int] = 1  # the number of the window's first turn (`turn_rewrite_reply` sets it)
    times: list[TurnTime] = Field(default_factory=list)

    # A name of its own, so the parent's `_compact_keys` (`facts` for `personal_facts`) runs as well.
    @model_validator(mode="before")
    @classmethod
    def _turn_rows(cls, v: Any) -> Any:
        if isinstance(v, dict) and "turns" in v and "sentences" not in v:
            rows = v["turns"] if isinstance(v["turns"], list) else []
            v = {**v, "sentences": [cls._placed(row, cls.first_turn + i) for i, row in enumerate(rows)]}
        return v

    @staticmethod
    def _placed(row: Any, number: int) -> Any:
        """A row without its turn number ([tag, topics], [topic numbers] of `mra_turn_labels="derived"`, or a
        keyed row with no origin) → the keyed row of turn `number`; a row that names its turn is left to
        `_sentence_items`."""
        if isinstance(row, list | tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in row):
            return {"origin": str(number), "topics": list(row)}
        if isinstance(row, list | tuple) and len(row) <= len(TURN_ROW_FIELDS):
            return {"origin": str(number), **_positional(row, TURN_ROW_FIELDS)}
        if isinstance(row, dict) and not row.get("origin"):
            return {**row, "origin": str(number)}
        return row

    @field_validator("times", mode="before")
    @classmethod
    def _time_rows(cls, v: Any) -> Any:
        if v is None or v == "None":
            return []
        if isinstance(v, list):
            return [_positional(x, TIME_FIELDS) for x in v if isinstance(x, dict | list | tuple)]
        return v

    @field_validator("sentences", mode="before")
    @classmethod
    def _sentence_items(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [_positional(x, SENTENCE_FIELDS if len(x) >= len(SENTENCE_FIELDS) - 1 else TURN_FIELDS)
                    if isinstance(x, list | tuple) else x for x in v if isinstance(x, dict | list | tuple)]
        return v

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return turn_rewrite_schema(1, CAP_SENTENCES)  # a call sends its window's: `turn_rewrite_reply`


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


def _one_per(n_turns: int, per: int) -> int:
    """One item per `per` turns of a window (rounded up), and at least one."""
    return max(1, -(-n_turns // per))


def turn_facts_cap(n_turns: int) -> int:
    """At most one fact per `TURNS_PER_FACT` turns of a window, and at least one."""
    return _one_per(n_turns, TURNS_PER_FACT)


def turn_times_cap(n_turns: int) -> int:
    """At most one dated turn per `TURNS_PER_TIME` turns of a window, and at least one."""
    return _one_per(n_turns, TURNS_PER_TIME)


def turn_rewrite_schema(first: int, last: int, derived: bool = False) -> dict[str, Any]:
    """The JSON schema call A sends with `mra_ingest_sentences="turn"` for the window of turns `first..last`
    (their numbers in the session): the session's topics; exactly one row per turn, in order, [tag, topic
    numbers]; the turns that speak of a day, [turn number, date]; a few short facts. Every list is bounded by
    the window (see `TURN_TOPICS`, `TURNS_PER_TIME`). `derived` (`mra_turn_labels`): a row is only the turn's
    one or two topic numbers, and there are no `times` (validation derives both tag and date)."""
    n = last - first + 1
    turn_number = {"type": "integer", "minimum": first, "maximum": last}
    topic_numbers = _list_schema({"type": "integer", "minimum": 1, "maximum": TURN_TOPICS}, 2)
    row = {**topic_numbers, "minItems": 1} if derived else _row_schema(_text_schema(CAP_TAG), topic_numbers)
    day = _row_schema(turn_number, {"type": "string", "pattern": DAY_PATTERN})
    fact = _row_schema(turn_number, _text_schema(CAP_PERSON), _text_schema(CAP_TAG), _text_schema(TURN_FACT_CHARS))
    properties = {
        "topics": _list_schema(_text_schema(CAP_TOPIC), TURN_TOPICS),
        "turns": {**_list_schema(row, n), "minItems": n},
        "times": _list_schema(day, turn_times_cap(n)),
        "facts": _list_schema(fact, turn_facts_cap(n)),
    }
    if derived:
        del properties["times"]
    return {"title": "RewriteTopics" if derived else "RewriteTurns", "type": "object", "properties": properties,
            "required": list(properties)}


@lru_cache(maxsize=256)
def turn_rewrite_reply(first: int, last: int, derived: bool = False) -> type[TurnRewriteReply]:
    """`TurnRewriteReply` with the schema of the window `first..last` sent to the endpoint."""
    schema = turn_rewrite_schema(first, last, derived)

    def model_json_schema(cls: type[TurnRewriteReply], *args: Any, **kwargs: Any) -> dict[str, Any]:
        return schema

    return type("RewriteTurns", (TurnRewriteReply,),
                {"__module__": __name__, "first_turn": first, "model_json_schema": classmethod(model_json_schema)})


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
