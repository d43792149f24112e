"""The day a turn speaks of, said on its session's date: MRAgent's derived event dates
(`mra_turn_labels="derived"`). The phrases are `recollect.dates`' (the rules that make an answer's relative
times absolute); here each stands for one day instead of a phrase to write.

Kept apart from `recollect.dates`, which every graph's answer step imports, so that this MRAgent-only
addition leaves the other graphs' fingerprints (and their eval rows) where they are.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from recollect.dates import (
    _RULES,
    WEEKDAYS,
    _ago,
    _count,
    _relative_day,
    _relative_period,
    _relative_weekday,
    _Rule,
    parse_day,
)


def _shift_month(d: date, shift: int) -> date:
    index = d.year * 12 + d.month - 1 + shift
    return date(index // 12, index % 12 + 1, 15)  # a month stands for its middle day


def _weekday_from(ref: date, weekday: int, direction: int) -> date:
    """The first `weekday` strictly before (direction -1) or after (+1) `ref`."""
    step = (ref.weekday() - weekday) % 7 or 7 if direction < 0 else (weekday - ref.weekday()) % 7 or 7
    return ref + timedelta(days=direction * step)


def _day_of(rule: _Rule, m: re.Match[str], ref: date) -> date | None:
    """The one day a matched phrase stands for; a period stands for its middle day; None when vague."""
    render = rule.render
    if render is _ago:
        n = _count(m["n"])
        if n is None:
            return None
        unit = m["unit"].lower()
        if unit == "month":
            return _shift_month(ref, -n)
        if unit == "year":
            return date(ref.year - n, 7, 1)
        return ref - timedelta(days=n * (7 if unit == "week" else 1))
    if render is _relative_day:
        word = " ".join(m[0].lower().split())
        return ref + timedelta(days={"the day before yesterday": -2, "yesterday": -1, "last night": -1,
                                     "tomorrow": 1, "the day after tomorrow": 2}.get(word, 0))
    direction = -1 if m.groupdict().get("which", "").lower() in ("last", "past", "previous") else 1
    if render is _relative_weekday:
        return _weekday_from(ref, WEEKDAYS.index(m["day"].capitalize()), direction)
    if render is _relative_period:
        unit, this = m["unit"].lower(), m["which"].lower() == "this"
        if unit == "weekend":  # its Saturday; "this weekend" is the coming one, or the one under way on a Sunday
            if this:
                return ref - timedelta(days=1) if ref.weekday() == 6 else _weekday_from(ref - timedelta(days=1), 5, 1)
            return _weekday_from(ref, 5, direction)
        if unit == "week":
            return ref if this else ref + timedelta(days=7 * direction)
        if unit == "month":
            return _shift_month(ref, 0 if this else direction)
        return date(ref.year + (0 if this else direction), 7, 1)
    rendered = render(m, ref)  # an absolute date: the day it names
    return parse_day(rendered[0]) if rendered else None


def spoken_day(text: str, reference: date) -> date | None:
    """The day the first time phrase of `text` stands for, said on `reference`: "yesterday", "two weeks ago",
    "last Saturday", "next month" (its 15th), "last year" (its 1 July), an ISO or written date. None when the
    text names no time, or only a vague one ("a few days ago")."""
    found = sorted(((m.start(), rule, m) for rule in _RULES for m in rule.pattern.finditer(text)),
                   key=lambda hit: hit[0])
    for _, rule, m in found:
        day = _day_of(rule, m, reference)
        if day is not None:
            return day
    return None
