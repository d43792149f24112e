"""MRAgent's reply schemas: question cues, seed selections, the navigate JSON protocol and the final answer.

The schemas are lenient about shape (a string where a list was asked, `{"id", "score"}` items where a
map was asked) because small models drift; the graph, not the schema, enforces ids and budgets.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from recollect.llm.lenient import StrList, Text


def ids_of(v: Any) -> list[str]:
    """A list of ids from a list, or from a comma/space separated string."""
    if v is None:
        return []
    if isinstance(v, str):
        return [x.strip() for x in re.split(r"[,\s]+", v) if x.strip()]
    if isinstance(v, list):
        return [str(x).strip() for x in v if x is not None and str(x).strip()]
    return []


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
        return ids_of(v) if not isinstance(v, list) else [str(x.get("id") if isinstance(x, dict) else x) for x in v]


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
        return ids_of(v)

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
    prune: list[str] = Field(default_factory=list)
    answer: str = ""
    supports: list[str] = Field(default_factory=list)
    confidence: float = 0.0


class KeepMemoriesArgs(BaseModel):
    """The native protocol's keep/prune decision: a pseudo-tool that route applies and never executes."""

    keep: list[str] = Field(default_factory=list, description="ids of new results worth keeping")
    prune: list[str] = Field(default_factory=list, description="ids of kept memories no longer needed")

    @field_validator("keep", "prune", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        return ids_of(v)


# mra_reply_bounds: bounds a JSON-schema grammar enforces while the model writes (validation stays lenient, as the
# parents'). The 1.5B model's first decisive question wrote ever longer possessive chains of one name as cue
# alternatives ("<name>'s group's meeting's time's date's year", "... month", ...) until the call's 300 tokens
# ran out, and a forced final answer came as a 200-token paragraph.
CUE_CHARS, CUE_ALTERNATIVES, CUES = 40, 4, 6


class BoundedQuestionCue(QuestionCue):
    cue: str = Field(json_schema_extra={"maxLength": CUE_CHARS})
    alternatives: StrList = Field(default_factory=list, json_schema_extra={
        "maxItems": CUE_ALTERNATIVES, "items": {"type": "string", "maxLength": CUE_CHARS}})


class BoundedQuestionCuesReply(QuestionCuesReply):
    time_window: str = Field(default="", json_schema_extra={"maxLength": 24})
    cues: list[BoundedQuestionCue] = Field(json_schema_extra={"maxItems": CUES})  # type: ignore[assignment]


class BoundedFinalReply(FinalReply):
    answer: Text = Field(json_schema_extra={"maxLength": 200})
    supports: list[str] = Field(default_factory=list, json_schema_extra={"maxItems": 10})
