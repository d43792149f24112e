"""HyMem's summary reply (the one LLM call per session at ingestion; memory.py in this folder builds with it).

`SummaryReply` is lenient on shape (a bare list, plain strings); `dense_reply` adds the density check
(`hymem_turns_per_summary`), and `bounded_reply` (`hymem_bounded_summaries`) also sends a schema that
bounds the reply by its session: at least the items the density check wants, each with one to
`hymem_max_turns_per_item` ids of the session's own turns.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from recollect.dialogue.turn_ids import id_items
from recollect.graphs.hymem.settings import HyMemContext
from recollect.llm.lenient import Text

# bounded_reply: an item's text, and how many more items than the density check wants a reply may write
ITEM_CHARS = 240
EXTRA_ITEMS = 4
DEFAULT_TURNS_PER_ITEM = 8  # the ids one item may list when hymem_max_turns_per_item is 0 (no link cap)


class SummaryItem(BaseModel):
    text: Text
    turn_ids: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _plain_string(cls, v: Any) -> Any:
        # The reference returns plain strings; accept them and link them by similarity later.
        if isinstance(v, str):
            return {"text": v, "turn_ids": []}
        return v

    @field_validator("turn_ids", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        return id_items(v)  # checked against the session's own turn ids in link_items


class SummaryReply(BaseModel):
    items: list[SummaryItem]

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, v: Any) -> Any:
        if isinstance(v, list):  # a bare list of items instead of {"items": [...]}
            return {"items": v}
        if isinstance(v, dict) and "items" not in v:
            for key in ("summaries", "summary", "facts"):
                if isinstance(v.get(key), list):
                    return {"items": v[key]}
        return v

    @field_validator("items")
    @classmethod
    def _non_empty(cls, v: list[SummaryItem]) -> list[SummaryItem]:
        kept = [i for i in v if i.text]
        if not kept:
            raise ValueError("no summary item with a non-empty text")
        return kept


def min_items(n_turns: int, ctx: HyMemContext) -> int:
    """Items a session of `n_turns` needs (hymem_turns_per_summary; 0 = any non-empty list, the spec)."""
    per = ctx.hymem_turns_per_summary
    return max(1, math.ceil(n_turns / per)) if per > 0 else 1


@lru_cache(maxsize=64)
def dense_reply(n_turns: int, needed: int) -> type[SummaryReply]:
    """SummaryReply that also rejects fewer than `needed` items, saying so (the retry shows the error)."""

    class DenseSummaryReply(SummaryReply):
        @field_validator("items")
        @classmethod
        def _dense(cls, v: list[SummaryItem]) -> list[SummaryItem]:
            if len(v) < needed:
                raise ValueError(
                    f"only {len(v)} item(s) for a session of {n_turns} turns: write at least {needed} items, "
                    "one per distinct event or topic, covering the session up to its last turn, each with the turn_ids "
                    "it comes from"
                )
            return v

    DenseSummaryReply.__name__ = SummaryReply.__name__  # the schema title the endpoint sees stays the same
    return DenseSummaryReply




@lru_cache(maxsize=64)
def bounded_reply(turn_ids: tuple[str, ...], needed: int, max_turns: int) -> type[SummaryReply]:
    """`dense_reply` whose schema, sent to the endpoint, bounds the reply by its session.

    On llama.cpp the schema becomes a grammar. Unbounded, the 1.5B model wrote one gist for a whole session
    (in 18 of 25 sessions of a held-out conversation, even after the density retry), or items whose turn
    ids were the prompt's placeholder ("turn id"), or ran to its token limit and fell back; most turns were
    then linked by no summary. Bounded, it writes `needed` to `needed + EXTRA_ITEMS` items, each with one to
    `max_turns` ids chosen among the session's own, and the density check passes on the first call."""
    base = dense_reply(len(turn_ids), needed)
    ids = {"type": "array", "items": {"type": "string", "enum": list(turn_ids)}, "minItems": 1,
           "maxItems": max_turns or DEFAULT_TURNS_PER_ITEM}
    item = {"type": "object", "properties": {"text": {"type": "string", "maxLength": ITEM_CHARS}, "turn_ids": ids},
            "required": ["text", "turn_ids"]}
    schema = {"title": "SummaryReply", "type": "object",
              "properties": {"items": {"type": "array", "items": item, "minItems": needed,
                                       "maxItems": needed + EXTRA_ITEMS}},
              "required": ["items"]}

    def model_json_schema(cls: type[SummaryReply], *args: Any, **kwargs: Any) -> dict[str, Any]:
        return schema

    return type("SummaryReply", (base,), {"__module__": __name__, "model_json_schema": classmethod(model_json_schema)})
