"""Lenient field types for LLM reply schemas.

Small models drift from a JSON schema in a few predictable ways: a number where a string belongs,
`null` for "nothing", one comma-separated string where a list belongs, `"2"` for `2`. Coercing those
shapes before validation saves a retry (a whole extra call on the CPU model) without accepting
anything the graphs would not: the graphs, not the schemas, enforce ids, ranges and budgets.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

# Strings a model writes when it means "empty list".
_EMPTY_WORDS = frozenset({"", "none", "null", "n/a", "[]"})
_LIST_SEP = re.compile(r"[,;\n]")


def as_text(v: Any) -> str:
    """`None` → "", anything else → its string, stripped."""
    return "" if v is None else (v if isinstance(v, str) else str(v)).strip()


def as_str_list(v: Any) -> Any:
    """A list of non-empty strings from a list, a dict's values or a `,`/`;`/newline-separated string.

    Nested objects inside a list are dropped (they are not strings); other shapes are left for
    validation to reject, so the retry shows the model a real error.
    """
    if v is None:
        return []
    if isinstance(v, str):
        if v.strip().lower() in _EMPTY_WORDS:
            return []
        return [p.strip() for p in _LIST_SEP.split(v) if p.strip()]
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list | tuple):
        return [s for x in v if x is not None and not isinstance(x, dict | list) and (s := str(x).strip())]
    return v


def as_int_or_raw(v: Any) -> Any:
    """`True`/`"3"`/`" -1 "` → int; anything else unchanged (validation decides)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return v


Text = Annotated[str, BeforeValidator(as_text)]
StrList = Annotated[list[str], BeforeValidator(as_str_list)]
