"""Relative times in an answer, made absolute against the date of the turn the answer rests on.

Every answer prompt asks the model to write "last week" or "next month" as a date; the 1.5B model
often copies the speaker's words instead, and an answer that says "next month" means nothing to a
reader months later. `AbsoluteDates` does that step deterministically:

- a relative phrase becomes a date, a month, a year, or a phrase anchored to a date ("last week" said
  on 9 June 2023 becomes "the week before 9 June 2023"; "last Saturday" becomes "the Saturday before
  25 May 2023", because which Saturday the speaker meant is not certain);
- ISO dates and month-first dates are written the dialogue's way ("2023-05-25", "May 08, 2023" become
  "25 May 2023"), which needs no reference date.

The reference date is the session date of the turn that says the phrase: a cited turn first, then a
turn the graph showed the model, else the first cited turn (see `pick_reference`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Literal

from recollect.dialogue.loaders import MONTHS, parse_session_datetime

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_VAGUE = ("a few", "a couple of", "several", "a couple")
# A preposition already before the phrase means the replacement needs none of its own.
_PREPOSITIONS = {"on", "in", "at", "by", "since", "until", "till", "from", "before", "after", "during", "of",
                 "to", "around", "about", "for", "between", "and", "or"}

Kind = Literal["day", "month", "year", "phrase"]


def human_date(d: date) -> str:
    """`25 May 2023`: the dialogue's own form, without the comma."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def _month(d: date, shift: int) -> str:
    index = d.year * 12 + d.month - 1 + shift
    return f"{MONTHS[index % 12]} {index // 12}"


def _count(word: str) -> int | None:
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBERS.get(word)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    # (match, reference date) -> (replacement, kind); a reference of None only reaches absolute rules
    render: Callable[[re.Match[str], date], tuple[str, Kind] | None]
    relative: bool = True


def _ago(m: re.Match[str], ref: date) -> tuple[str, Kind] | None:
    amount, unit = m["n"].lower(), m["unit"].lower()
    n = _count(amount)
    if n is None:  # "a few days ago": keep the vagueness, anchor it
        return f"{amount} {unit}s before {human_date(ref)}", "phrase"
    if unit == "day":
        return human_date(ref - timedelta(days=n)), "day"
    if unit == "week":
        return (f"the week before {human_date(ref)}" if n == 1 else f"{amount} weeks before {human_date(ref)}"), "phrase"
    if unit == "month":
        return _month(ref, -n), "month"
    return str(ref.year - n), "year"


def _relative_period(m: re.Match[str], ref: date) -> tuple[str, Kind] | None:
    which, unit = m["which"].lower(), m["unit"].lower()
    shift = {"last": -1, "past": -1, "previous": -1, "next": 1, "coming": 1, "this": 0}[which]
    if unit in ("week", "weekend"):
        anchor = {-1: "before", 1: "after", 0: "of"}[shift]
        return f"the {unit} {anchor} {human_date(ref)}", "phrase"
    if unit == "month":
        return _month(ref, shift), "month"
    return str(ref.year + shift), "year"


def _relative_weekday(m: re.Match[str], ref: date) -> tuple[str, Kind] | None:
    anchor = "before" if m["which"].lower() in ("last", "past", "previous") else "after"
    return f"the {m['day'].capitalize()} {anchor} {human_date(ref)}", "phrase"


def _relative_day(m: re.Match[str], ref: date) -> tuple[str, Kind] | None:
    word = " ".join(m[0].lower().split())
    offset = {"the day before yesterday": -2, "yesterday": -1, "last night": -1, "tomorrow": 1,
              "the day after tomorrow": 2}.get(word, 0)
    return human_date(ref + timedelta(days=offset)), "day"


def _iso(m: re.Match[str], ref: date) -> tuple[str, Kind] | None:
    try:
        return human_date(date(int(m["y"]), int(m["m"]), int(m["d"]))), "day"
    except ValueError:  # not a calendar date: leave it
        return None


def _month_name(text: str) -> int | None:
    text = text.lower().rstrip(".")
    for i, name in enumerate(MONTHS):
        if name.lower() == text or (len(text) >= 3 and name.lower().startswith(text)):
            return i + 1
    return None


def _written(m: re.Match[str], ref: date) -> tuple[str, Kind] | None:
    month = _month_name(m["mon"])
    try:
        return (human_date(date(int(m["y"]), month, int(m["d"].rstrip("stndrh")))), "day") if month else None
    except ValueError:
        return None


_N = r"(?P<n>\d{1,2}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + "|" + "|".join(_VAGUE) + ")"
_DAY = "|".join(WEEKDAYS)
_MON = "|".join([*MONTHS, *(m[:3] for m in MONTHS), "Sept"])
_RULES = (
    _Rule(re.compile(rf"\b{_N}\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I), _ago),
    _Rule(re.compile(r"\bthe\s+day\s+(?:before\s+yesterday|after\s+tomorrow)\b|\byesterday\b|\blast\s+night\b"
                     r"|\btoday\b|\btonight\b|\btomorrow\b|\bthis\s+(?:morning|afternoon|evening)\b", re.I),
          _relative_day),
    _Rule(re.compile(rf"\b(?P<which>last|past|previous|next|coming)\s+(?P<day>{_DAY})\b", re.I), _relative_weekday),
    _Rule(re.compile(r"\b(?:the\s+)?(?P<which>last|past|previous|next|coming|this)\s+(?P<unit>weekend|week|month|year)\b",
                     re.I), _relative_period),
    _Rule(re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b"), _iso, relative=False),
    _Rule(re.compile(rf"\b(?P<mon>{_MON})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})\b", re.I),
          _written, relative=False),
    _Rule(re.compile(rf"\b(?:the\s+)?(?P<d>0\d|\d{{1,2}}(?:st|nd|rd|th))\s+(?:of\s+)?(?P<mon>{_MON})\.?,?\s+(?P<y>\d{{4}})\b", re.I),
          _written, relative=False),
)
_DAY_MONTH_YEAR = re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mon>{_MON})\.?,?\s+(?P<y>\d{{4}})\b", re.I)


def relative_phrases(answer: str) -> list[str]:
    """The relative time phrases in an answer, in order (what a reference date is needed for)."""
    found = [(m.start(), m[0]) for rule in _RULES if rule.relative for m in rule.pattern.finditer(answer)]
    return [text for _, text in sorted(found)]


@dataclass
class DateRewrite:
    answer: str
    changes: list[dict[str, str]] = field(default_factory=list)  # {"from", "to"}
    unresolved: list[str] = field(default_factory=list)  # relative phrases left as they were (no reference)


def _with_preposition(answer: str, start: int, end: int, text: str, kind: Kind) -> str:
    """`in June 2023` inside a sentence, a bare `June 2023` when the phrase is the whole answer."""
    whole = not answer[:start].strip(" \"'") and not answer[end:].strip(" .!\"'")
    if whole or kind == "phrase":
        return text[0].upper() + text[1:] if whole and answer[start].isupper() and kind == "phrase" else text
    before = answer[:start].split()
    if before and before[-1].lower().strip(",") in _PREPOSITIONS:
        return text
    return f"{'on' if kind == 'day' else 'in'} {text}"


def absolute_dates(answer: str, reference: date | None) -> DateRewrite:
    """Rewrite each relative phrase against `reference`, and each ISO or month-first date the dialogue's
    way. Without a reference, relative phrases stay and are listed as unresolved."""
    spans: list[tuple[int, int, str, Kind | None]] = []  # kind None: a date rewritten as a date, in place
    unresolved: list[str] = []
    for rule in _RULES:
        for m in rule.pattern.finditer(answer):
            if any(s < m.end() and m.start() < e for s, e, _, _ in spans):
                continue  # an earlier rule already took these characters
            if rule.relative and reference is None:
                unresolved.append(m[0])
                continue
            rendered = rule.render(m, reference or date.min)
            if rendered is not None and rendered[0] != m[0]:
                spans.append((m.start(), m.end(), rendered[0], rendered[1] if rule.relative else None))
    out, changes, cursor = [], [], 0
    for start, end, text, kind in sorted(spans):
        replacement = text if kind is None else _with_preposition(answer, start, end, text, kind)
        out += [answer[cursor:start], replacement]
        changes.append({"from": answer[start:end], "to": replacement})
        cursor = end
    out.append(answer[cursor:])
    return DateRewrite(answer="".join(out), changes=changes, unresolved=unresolved)


def parse_day(raw: object) -> date | None:
    """The calendar day of a turn's date-time: LoCoMo form, ISO 8601, or `8 May, 2023`."""
    text = str(raw or "").strip()
    parsed = parse_session_datetime(text, allow_iso=True) if text else None
    if parsed is not None:
        return parsed.date()
    m = _DAY_MONTH_YEAR.search(text)
    month = _month_name(m["mon"]) if m else None
    try:
        return date(int(m["y"]), month, int(m["d"])) if m and month else None
    except ValueError:
        return None


def _comparable(text: str) -> str:
    """Words only, lower case, number words as digits: "four years ago!" contains "4 years ago"."""
    words = (w if w in ("a", "an") else str(_NUMBERS.get(w, w)) for w in re.findall(r"[a-z0-9']+", text.lower()))
    return f" {' '.join(words)} "


@dataclass(frozen=True)
class DatedTurn:
    id: str
    text: str
    day: date | None


def pick_reference(phrases: list[str], supports: Iterable[str], shown: Iterable[str],
                   turns: Mapping[str, DatedTurn]) -> tuple[DatedTurn, str] | None:
    """The dated turn the answer's relative time was said in, and why it was picked.

    1. a cited turn whose text contains the phrase; 2. a turn shown to the model that contains it
    (in the order shown); 3. the first dated cited turn. None when no candidate has a date.
    """
    supports, shown = list(supports), list(shown)
    needles = [_comparable(p) for p in phrases]

    def says_it(tid: str) -> bool:
        turn = turns.get(tid)
        if turn is None or turn.day is None:
            return False
        text = _comparable(turn.text)  # once per turn, not once per phrase
        return any(n in text for n in needles)

    for ids, why in ((supports, "cited turn says it"), (shown, "shown turn says it")):
        hit = next((t for t in ids if says_it(t)), None)
        if hit is not None:
            return turns[hit], why
    first = next((turns[t] for t in supports if t in turns and turns[t].day), None)
    return (first, "first cited turn") if first else None
