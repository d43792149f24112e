"""HyMem's reply schemas and its one way of asking the model (README.md in this folder, "Nodes").

The schemas are lenient where a small model is sloppy ("0" for 0, a comma-separated string for a
list, JSON where the answer text belongs); the coercions live in their validators, so what the
nodes read is already clean.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, field_validator

from recollect.dialogue.turn_ids import id_items
from recollect.graphs.hymem.layout import call_messages
from recollect.graphs.hymem.settings import HyMemContext
from recollect.llm.lenient import Text, as_int_or_raw
from recollect.llm.models import get_chat_model
from recollect.llm.structured import StructuredResult, call_structured
from recollect.steps import clean_answer
from recollect.turn_continue import exchange_of

MAX_TOKENS = 512  # every HyMem query-time call; the light prompt's budget reserves it too


def _int_list(v: Any) -> Any:
    """Integers from a list, a single value or a comma-separated string; anything else is dropped."""
    if v is None or (isinstance(v, str) and v.strip().lower() in ("", "none", "null")):
        return []
    if isinstance(v, str):
        v = v.replace(";", ",").split(",")
    if isinstance(v, int):
        v = [v]
    if not isinstance(v, list | tuple):
        return []
    out = []
    for x in v:
        x = as_int_or_raw(x.strip() if isinstance(x, str) else x)
        if isinstance(x, int) and not isinstance(x, bool):
            out.append(x)
    return out


IntList = Annotated[list[int], BeforeValidator(_int_list)]


class LightReply(BaseModel):
    """`finished`: 0 = answered, 2 = insufficient ("0"/"2" strings accepted); `used`: the summary ids
    the answer rests on (our addition, for selective supports; range-checked in `light`)."""

    finished: Annotated[Literal[0, 2], BeforeValidator(as_int_or_raw)]
    answer: Text = ""
    used: IntList = Field(default_factory=list)


class LightTurnsReply(BaseModel):
    """The light reply when the call reads turns (`hymem_light_turn_tokens`): as `LightReply`, but `used` holds
    the turn ids the answer rests on (matched against the shown turns in `light`)."""

    finished: Annotated[Literal[0, 2], BeforeValidator(as_int_or_raw)]
    answer: Text = ""
    used: list[str] = Field(default_factory=list)

    @field_validator("used", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        return id_items(v)


class SelectReply(BaseModel):
    """Indices into one batch. Non-integers are dropped here; range and duplicates in `deep`."""

    selected: IntList = Field(default_factory=list)


class DeepReply(BaseModel):
    answer: Text
    supports: list[str] = Field(default_factory=list)

    @field_validator("answer")
    @classmethod
    def _real_answer(cls, v: str) -> str:
        if not clean_answer(v):
            raise ValueError("answer is empty (or only JSON): write the answer text")
        return clean_answer(v)

    @field_validator("supports", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        return id_items(v)  # matched against the shown turns in `deep`


class ReflectReply(BaseModel):
    """`finished`: 1 = satisfied, 0 = not (then `new_question` is the rewritten query)."""

    finished: Annotated[Literal[0, 1], BeforeValidator(as_int_or_raw)]
    new_question: Text = ""


def call_kept(ctx: HyMemContext, name: str, schema: type[BaseModel], node: str,
              **values: Any) -> tuple[StructuredResult[Any], dict[str, str] | None]:
    """`call`, and the exchange the final answer call may continue (hymem_final_answer_continues): None when that
    call is off, or the reply failed or needed its retry (it answered a longer chat)."""
    msgs = call_messages(ctx, name, values)
    res = call_structured(get_chat_model(ctx), msgs, schema, node=node, method=ctx.structured_method,
                          max_tokens=MAX_TOKENS)
    kept = ctx.hymem_final_answer_tokens and ctx.hymem_final_answer_continues and res.value is not None \
        and res.attempts == 1
    return res, exchange_of(msgs, res.raw) if kept else None


def call(ctx: HyMemContext, name: str, schema: type[BaseModel], node: str,
         **values: Any) -> StructuredResult[Any]:
    """One structured call of prompt `name` filled with `values`, in the layout `hymem_prefix_layout` picks
    (layout.py: the paper's `prompts/hymem/<name>.md` as the only user message, or frame, head and task)."""
    return call_structured(get_chat_model(ctx), call_messages(ctx, name, values), schema, node=node,
                           method=ctx.structured_method, max_tokens=MAX_TOKENS)
