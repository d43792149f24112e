"""What MRAgent's ingestion writes and its read side reads: the storage kinds and the id forms.

Both sides import this module and nothing of each other, so the builder (`memory.py`) and the
question-time store (`store.py`) agree on one layout without an import cycle.

Ids. A turn id is whatever the dialogue says (LoCoMo's `D3:12`, a simple file's `bob-q1`), so no
pattern can tell a turn id; ids that come from the model are resolved against the turn ids that exist
(`turn_of`). Ids we build ourselves are structural: an event (one rewritten sentence) is
`<turn id>-<n>`, a topic is `D<session>:t<n>` (see README.md in this folder, "What ingestion builds").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Container

METHOD = "mragent"
EVENTS_KIND = "mragent_events"  # vector collection of the rewritten sentences
TOPICS_KIND = "mragent_topics"  # vector collection of the topic texts
K_EVENT, K_CUE, K_TOPIC, K_PERSONA, K_SESSION, K_META = (
    "mra_event", "mra_cue", "mra_topic", "mra_persona", "mra_session", "mra_meta",
)
OTHER_TAG = "Other"  # the tag of a sentence whose tag the model left empty

TOPIC_ID = re.compile(r"^D\d+:t\d+$")
# `<turn id>-<n>`: the turn id is everything before the last "-<digits>", whatever its own shape.
_EVENT_ID = re.compile(r"(.+)-(\d+)")
_DIGITS = re.compile(r"\d+")


def topic_id(session_index: int, n: int) -> str:
    """The id of a session's n-th topic (numbered across the session's windows)."""
    return f"D{session_index}:t{n}"


def event_id(turn_id: str, n: int) -> str:
    """The id of a turn's n-th rewritten sentence."""
    return f"{turn_id}-{n}"


def event_turn(ident: str) -> str | None:
    """The turn part of an id written as an event id (`D3:12-2` → `D3:12`), known turn or not."""
    m = _EVENT_ID.fullmatch(ident)
    return m[1] if m else None


def turn_of(ident: str, turns: Container[str]) -> str | None:
    """The known turn a turn id or event id names: `D3:12-2` → `D3:12`, `D3:12` → `D3:12`; else None.

    Exact (case and punctuation count), as the ids were always read: a model's `[D3:12]` names nothing.
    """
    s = (ident or "").strip()
    if s in turns:
        return s
    head = event_turn(s)
    return head if head is not None and head in turns else None


def id_shape(ident: str) -> str:
    """The id with every run of digits replaced by 0: `D3:12` → `D0:0`, `bob-q1` → `bob-q0`."""
    return _DIGITS.sub("0", ident)


def turn_shapes(turns: Collection[str]) -> frozenset[str]:
    """The shapes of a dialogue's turn ids (LoCoMo: just `D0:0`), for `shaped_like_id`."""
    return frozenset(id_shape(t) for t in turns)


def id_turn(ident: str, shapes: Container[str]) -> str | None:
    """The turn part of an id written like this dialogue's turn ids (`turn_shapes`), existing or not:
    `D9:9-2` → `D9:9`, `D9:9` → `D9:9`; an id of another shape (`D3:t2`, `d3:12`, `Maya`) → None."""
    s = (ident or "").strip()
    if id_shape(s) in shapes:
        return s
    head = event_turn(s)
    return head if head is not None and id_shape(head) in shapes else None


def shaped_like_id(ident: str, shapes: Container[str]) -> bool:
    """Whether `ident` is written like a turn id or event id of this dialogue, existing or not (tool
    errors tell "not an id at all" from "an id that does not exist" by this)."""
    return id_turn(ident, shapes) is not None
