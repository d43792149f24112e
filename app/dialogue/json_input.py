"""Dialogue JSON that everything after the loader can handle: bounded nesting, and text that can be stored.

Python's `json` accepts two things that fail far from the input:

- Nesting tens of thousands of levels deep. `json.loads` and everything that walks its result recurse, so
  they end in a `RecursionError` (in the loader, the size check, the store's encoder). A dialogue is about six
  levels deep (list, sample, conversation, sessions, turn, image URLs), so `MAX_DEPTH` is far above any real
  file and far below Python's recursion limit. Text is measured before it is parsed, and a value that arrives
  already parsed (the server's `ingest` input) is walked without recursion.
- A lone UTF-16 surrogate escape (`"\\ud800"`). `json.loads` turns it into a `str` that UTF-8 cannot
  encode, so SQLite, Chroma and the LangGraph store refuse the turn when it is written, after the namespace's
  vector collection was created. Such text is refused, not repaired: replacing it (with U+FFFD) would store
  and cite a text the file does not hold, so the error names the field to fix instead.

Every refusal is a `DialogueError` naming where (`file: sessions[0].turns[3].text: ...`).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from recollect.dialogue.models import DialogueError

MAX_DEPTH = 64
# A JSON string (escapes included), removed before brackets are counted: brackets inside text do not nest.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]{1,60}")


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (without parsing it; C-speed passes only)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _too_deep(where: str) -> DialogueError:
    return DialogueError(f"{where}: JSON nested more than {MAX_DEPTH} levels deep; a dialogue needs about six")


def parse_json_text(text: str, where: str) -> Any:
    """Parse dialogue JSON text, refusing nesting over `MAX_DEPTH` and text that cannot be stored.

    Malformed JSON raises `json.JSONDecodeError` as it is: each caller words it for its reader (a file's
    line and column, or the server's message about the content it was sent)."""
    if json_depth(text) > MAX_DEPTH:
        raise _too_deep(where)
    data = json.loads(text)
    check_json_value(data, where)
    return data


def _key_part(key: str) -> str:
    return f".{key}" if _PLAIN_KEY.fullmatch(key) else f"[{ascii(key[:40])}]"


def _path(parents: dict[int, tuple[int | None, str]], node: int | None) -> str:
    """The JSON path of a visited node (`sessions[0].turns[3]`), from the parent links of the walk."""
    parts: list[str] = []
    while node is not None:
        node, part = parents[node]
        parts.append(part)
    return "".join(reversed(parts)).lstrip(".") or "top level"


def _unstorable(text: str) -> str | None:
    """Why `text` cannot be stored, or None: a lone surrogate, named by its code and position."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return (f"holds a lone UTF-16 surrogate (U+{ord(found.group()):04X} at character {found.start()}), which is "
            "not text and cannot be stored; write the character itself or a complete surrogate pair")


def check_json_value(data: Any, where: str) -> None:
    """Refuse a parsed dialogue nested over `MAX_DEPTH` or holding a string (or key) that cannot be stored.

    Iterative, so a value nested deeper than Python's recursion limit is refused, not raised on.
    """
    parents: dict[int, tuple[int | None, str]] = {}  # node number -> (its parent's number, its path part)
    stack: list[tuple[Any, int, int | None, str]] = [(data, 1, None, "")]
    count = 0
    while stack:
        value, depth, parent, part = stack.pop()
        if isinstance(value, str):
            problem = _unstorable(value)
            if problem:
                parents[count] = (parent, part)
                raise DialogueError(f"{where}: {_path(parents, count)}: {problem}")
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(where)
        node, count = count, count + 1
        parents[node] = (parent, part)
        if isinstance(value, list):
            stack.extend((item, depth + 1, node, f"[{i}]") for i, item in reversed(list(enumerate(value))))
            continue
        for key in value:
            problem = _unstorable(key) if isinstance(key, str) else None
            if problem:
                raise DialogueError(f"{where}: {_path(parents, node)}: a key {problem}")
        stack.extend((item, depth + 1, node, _key_part(str(key))) for key, item in reversed(list(value.items())))
