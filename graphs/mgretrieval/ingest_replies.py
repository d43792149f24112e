"""The reply schemas of MGRetrieval's two ingestion calls, p_s1 (keyword extraction) and p_s2
(vocabulary matching), and how a reply is read back onto the prompt's turns, candidates and
shortlist entries (README.md in this folder, "What ingestion builds").

The json format's schema docstrings and the compact format's fixed schemas are sent to the model
with each request, so they are part of the prompt and stay exactly as they are.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator

from recollect.dialogue.models import Turn
from recollect.graphs.mgretrieval.vocabulary import normalise_keyword
from recollect.llm.lenient import as_str_list

# Compact p_s1 schema cap: characters per keyword in a turn's comma-separated keyword string (a 1–3
# word keyword plus ", " fits easily); it stops a looping string without cutting a normal reply.
CHARS_PER_KEYWORD = 24

# Two reply formats (`MGRetrievalContext.mg_ingest_format`), parsed by the same lenient models so that a
# reply in either shape is understood in either mode:
# - "json" (the spec's): {"turns": [{"id": "D1:3", "keywords": [...]}]} and
#   {"matches": [{"keyword": "hiking", "entry": "hike"}]}.
# - "compact": {"3": "dog, adoption"} (turn number in the prompt → its keywords as one comma-separated
#   string: one separator token per keyword instead of a closing and an opening quote) and
#   {"1": 2, "2": 0} (candidate number → shortlist entry number, 0 = new): no repeated keys, no echoed
#   keyword text. Keyword lists ({"3": ["dog", "adoption"]}) are accepted as well.
# Both are normalised to the json shape before validation, so the cached value and everything after
# the parse is the same for the two formats.


def _turn_items(v: Any) -> Any:
    """Turn replies → `[{"id", "keywords"}]`: from a map id → keywords, a list of items, a list of
    such maps, or a bare list of keyword lists (positional: ids "1", "2", …)."""
    if isinstance(v, dict):  # {"D1:1": [...], ...} or {"1": [...], ...}
        return [{"id": k, "keywords": kw} for k, kw in v.items()]
    if not isinstance(v, list):
        return v
    out: list[Any] = []
    for pos, item in enumerate(v, 1):
        if isinstance(item, dict) and not {"id", "keywords"} & set(item):
            out.extend({"id": k, "keywords": kw} for k, kw in item.items())
        elif isinstance(item, list):
            out.append({"id": str(pos), "keywords": item})
        else:
            out.append(item)
    return out


def _match_items(v: Any) -> Any:
    """A list of match replies → `[{"keyword", "entry"}]`; pairs like [1, 2] are (candidate, entry)."""
    if isinstance(v, dict):  # {"hiking": "hike"} or {"1": 2}
        return [{"keyword": k, "entry": e} for k, e in v.items()]
    if not isinstance(v, list):
        return v
    out: list[Any] = []
    for item in v:
        if isinstance(item, list | tuple) and item:
            out.append({"keyword": item[0], "entry": item[1] if len(item) > 1 else None})
        elif isinstance(item, dict) and not {"keyword", "entry"} & set(item):  # [{"1": 2}, {"2": 0}]
            out.extend({"keyword": k, "entry": e} for k, e in item.items())
        else:
            out.append(item)
    return out


def _keyed_by_numbers(data: dict[str, Any]) -> bool:
    """A map keyed by turn / candidate numbers or turn ids ("1", "D1:3"). Other unwrapped objects
    ({"answer": …}, {"keywords": [...]}) stay invalid, so the model gets its retry as before."""
    return any(any(c.isdigit() for c in str(k)) for k in data)


def _single_list(data: dict[str, Any]) -> list[Any] | None:
    """{"pairs": [[1, 2], ...]}: a one-key wrapper around a list of items (lists or objects)."""
    if len(data) == 1:
        (only,) = data.values()
        if isinstance(only, list) and only and all(isinstance(x, list | dict) for x in only):
            return only
    return None


class TurnKeywords(BaseModel):
    id: str
    keywords: list[str] = Field(default_factory=list)

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        return str(v).strip().strip("[]").strip() if v is not None else v

    @field_validator("keywords", mode="before")
    @classmethod
    def _kw(cls, v: Any) -> Any:
        return as_str_list(v)


# The json format's schemas: their docstrings are part of the schema sent, so they stay as they were.
class ExtractionReply(BaseModel):
    """p_s1: keywords for every turn of the session."""

    turns: list[TurnKeywords]

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if isinstance(data, list):  # a bare list of turn items or of positional keyword lists
            return {"turns": data}
        if isinstance(data, dict) and "turns" not in data:
            wrapped = _single_list(data)  # {"keywords": [["dog"], ["cat"]]}
            if wrapped is not None:
                return {"turns": wrapped}
            if _keyed_by_numbers(data):  # the compact shape {"1": "dog, cat", ...}
                return {"turns": data}
        return data

    @field_validator("turns", mode="before")
    @classmethod
    def _turns(cls, v: Any) -> Any:
        return _turn_items(v)


class KeywordMatch(BaseModel):
    keyword: str
    entry: str | None = None

    @field_validator("entry", mode="before")
    @classmethod
    def _entry(cls, v: Any) -> Any:
        if isinstance(v, list | tuple):  # {"1": [2]}
            v = v[0] if v else None
        if isinstance(v, dict):  # {"1": {"entry": 2}}
            v = v.get("entry")
        if v is None or isinstance(v, bool):
            return None
        if str(v).strip().lower() in ("", "0", "null", "none", "new", "n/a"):  # 0 = new in the compact format
            return None
        return str(v).strip()

    @field_validator("keyword", mode="before")
    @classmethod
    def _keyword(cls, v: Any) -> Any:
        return "" if v is None else str(v).strip()


class MatchReply(BaseModel):
    """p_s2: for each candidate keyword, one of its shortlist entries or null."""

    matches: list[KeywordMatch]

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if isinstance(data, list):  # [[1, 2], [2, 0]]
            return {"matches": data}
        if isinstance(data, dict) and "matches" not in data:
            wrapped = _single_list(data)  # {"pairs": [[1, 2], [2, 0]]}
            if wrapped is not None:
                return {"matches": wrapped}
            if _keyed_by_numbers(data):  # the compact shape {"1": 2, ...}
                return {"matches": data}
        return data

    @field_validator("matches", mode="before")
    @classmethod
    def _matches(cls, v: Any) -> Any:
        return _match_items(v)


class _FixedSchema:
    """A reply model whose JSON schema (sent to the endpoint) is given, not derived from its fields."""

    reply_schema: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if cls.reply_schema:
            return copy.deepcopy(cls.reply_schema)
        return super().model_json_schema(*args, **kwargs)  # type: ignore[misc]


class CompactExtractionReply(_FixedSchema, ExtractionReply):
    """p_s1 in the compact format; parses (and dumps) like `ExtractionReply`."""


class CompactMatchReply(_FixedSchema, MatchReply):
    """p_s2 in the compact format; parses (and dumps) like `MatchReply`."""


@lru_cache(maxsize=256)
def compact_extraction_model(n_turns: int, k: int) -> type[CompactExtractionReply]:
    """Schema {"1": "kw, kw", …, "n": "…"}: every turn number once, in order.

    Under a grammar (llama.cpp) the keys are forced, so no turn is skipped and no id invented, and a
    turn's string cannot run on past about k keywords: the reply is bounded at n·k·24 characters
    whatever the session length, and `max_tokens` (60 + 8·k·n) covers a normal reply several times.
    """
    keys = [str(i) for i in range(1, n_turns + 1)]
    item = {"type": "string", "maxLength": CHARS_PER_KEYWORD * k}
    schema = {"title": "MGKeywords", "type": "object", "properties": {key: item for key in keys},
              "required": keys, "additionalProperties": False}
    return type("MGKeywords", (CompactExtractionReply,), {"__module__": __name__, "reply_schema": schema})


@lru_cache(maxsize=256)
def compact_match_model(sizes: tuple[int, ...]) -> type[CompactMatchReply]:
    """Schema {"1": 0..|shortlist 1|, …}: one entry number per candidate, in order (0 = new)."""
    keys = [str(i) for i in range(1, len(sizes) + 1)]
    props = {key: {"type": "integer", "minimum": 0, "maximum": size}
             for key, size in zip(keys, sizes, strict=True)}
    schema = {"title": "MGMatches", "type": "object", "properties": props, "required": keys,
              "additionalProperties": False}
    return type("MGMatches", (CompactMatchReply,), {"__module__": __name__, "reply_schema": schema})


def _number(raw: Any) -> int | None:
    """A reply's 1-based number ("3", 3, "#3"), else None."""
    if isinstance(raw, bool):
        return None
    s = str(raw).strip().lstrip("#")
    return int(s) if s.isdigit() else None


def resolve_turn(raw: Any, batch: Sequence[Turn], numbers_first: bool) -> str | None:
    """The batch turn a reply key names: its turn number in the prompt or its id; unknown → None.

    The compact prompt numbers the turns, so there a number is read as a position first (a dataset
    whose ids are bare numbers stays unambiguous); the json prompt shows ids, so an id comes first.
    """
    ids = [t.id for t in batch]
    key = "" if raw is None else str(raw).strip()
    pos = _number(key)
    by_pos = ids[pos - 1] if pos is not None and 1 <= pos <= len(ids) else None
    if numbers_first and by_pos:
        return by_pos
    return key if key in ids else by_pos


def resolve_candidate(raw: Any, batch: Sequence[tuple[str, list[str]]], candidates: dict[str, list[str]],
                      numbers_first: bool) -> str | None:
    """The candidate keyword a match reply names: its number in the listing or its text."""
    pos = _number(raw)
    by_pos = batch[pos - 1][0] if pos is not None and 1 <= pos <= len(batch) else None
    if numbers_first and by_pos:
        return by_pos
    text = normalise_keyword(raw)
    return text if text in candidates else by_pos


def resolve_entry(raw: Any, shortlist: Sequence[str],
                  numbers_first: bool) -> tuple[str | None, str | None]:
    """(the shortlist entry a match reply names or None, why it was rejected or None).

    Entries are numbered 1.. in the compact listing; 0 / null = new. A number out of range and a text
    that is not in the keyword's shortlist both count as null.
    """
    if raw is None:
        return None, None
    pos = _number(raw)
    by_pos = shortlist[pos - 1] if pos is not None and 1 <= pos <= len(shortlist) else None
    if numbers_first and by_pos:
        return by_pos, None
    text = normalise_keyword(raw)
    if text in shortlist:
        return text, None
    if by_pos:
        return by_pos, None
    if not text or pos == 0:
        return None, None
    return None, ("entry number out of range" if pos is not None else "not in the keyword's shortlist")
