"""What MRAgent's traversal tools take and give back: the per-question `ToolContext`, the `ToolResult`,
and one pydantic argument model per tool (its field descriptions are what `bind_tools` advertises).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.store import CueTagGraph


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
