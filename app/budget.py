"""Prompt budget packing: every method fits its memory lines into a token budget the same way.

Items are taken in order (best first) and each costs what `cost(item)` estimates
(`recollect.llm.usage.estimate_tokens` of its rendered line, usually). Three shapes cover the methods:

- `pack`: keep items while they fit; at the first one that does not, stop (`on_overflow="stop"`) or
  leave it out and try the next (`"skip"`). `keep_first` keeps the first item even when it alone
  overflows, so a prompt never goes out with no memory at all.
- `pack_batches`: cut a sequence into consecutive batches that each fit (ingestion windows); an item
  too large for any batch stands alone.
- `TokenBudget`: a running budget that lines are taken from one at a time, for prompts assembled
  section by section.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from recollect.llm.usage import estimate_tokens

T = TypeVar("T")


@dataclass
class Packed(Generic[T]):
    kept: list[T] = field(default_factory=list)
    dropped: list[T] = field(default_factory=list)
    used: int = 0  # tokens of the kept items, plus the starting `used`


def pack(items: Iterable[T], budget: int, cost: Callable[[T], int], *, used: int = 0, keep_first: bool = False,
         on_overflow: Literal["stop", "skip"] = "stop") -> Packed[T]:
    """The items that fit `budget` tokens after `used`, in order; see the module docstring."""
    out: Packed[T] = Packed(used=used)
    stopped = False
    for item in items:
        if stopped:
            out.dropped.append(item)
            continue
        c = cost(item)
        if out.used + c > budget and not (keep_first and not out.kept):
            out.dropped.append(item)
            stopped = on_overflow == "stop"
            continue
        out.kept.append(item)
        out.used += c
    return out


def pack_batches(items: Iterable[T], budget: int, cost: Callable[[T, int], int], *, base: int = 0) -> list[list[T]]:
    """Consecutive batches of `items`, each within `budget` tokens (`base` is every batch's fixed part).

    `cost(item, position)` gets the item's 1-based position in its batch (numbered lines cost more as
    the numbers grow). A batch always takes at least one item.
    """
    batches: list[list[T]] = []
    current: list[T] = []
    used = base
    for item in items:
        c = cost(item, len(current) + 1)
        if current and used + c > budget:
            batches.append(current)
            current, used = [], base  # the item keeps the cost it was measured at (a slight overestimate)
        current.append(item)
        used += c
    if current:
        batches.append(current)
    return batches


class TokenBudget:
    """A running budget: `take(text)` admits a line only if its tokens (plus `per_line`) still fit."""

    def __init__(self, tokens: int, *, per_line: int = 0) -> None:
        self.left = tokens
        self.per_line = per_line

    def take(self, text: str) -> bool:
        c = estimate_tokens(text) + self.per_line
        if c > self.left:
            return False
        self.left -= c
        return True
