"""Turn ids of any shape: one matcher for citations in model replies and free text.

Turn ids are whatever the data says: LoCoMo's `D3:12`, a simple file's `"bob-q1"`, or the ids an
external `BaseRetriever` gives its documents. A pattern cannot know them, so citations are matched
against the ids that are actually in play (the turns shown, a session's turns):

- `id_items` is the reply-schema coercion: it turns a model's "supports"/"turn_ids" value into
  candidate strings (brackets and quotes stripped, LoCoMo-style ids pulled out of prose), without
  needing to know the valid ids.
- `TurnIdMatcher(known).resolve(items)` maps those candidates onto known ids (exact match, case
  insensitive, or a known id cited inside the item); `.find(texts)` lists the known ids cited in
  free text such as evidence bullets.

Inside free text an id counts when it is written in brackets (`[bob-q1]`, the form every prompt
shows), or bare when it looks like an id (three characters or more, with a digit or a separator), so
that a turn called `a` or `intro` is not "cited" by ordinary words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# The LoCoMo shape, used only where no set of known ids exists (pulling ids out of a prose item).
LOCOMO_ID = re.compile(r"\bD\d+:\d+\b")
_STRIP = " \t\r\n[](){}<>\"'`*.,;"
_SPLIT = re.compile(r"[,;\n]")


def clean_id(text: str) -> str:
    """An id as a model writes it, without surrounding brackets, quotes, bullets or punctuation."""
    return str(text).strip().strip(_STRIP).strip()


def id_items(value: Any) -> list[str]:
    """Candidate id strings from a reply field (list, comma-separated string, or prose).

    Each item is cleaned; an item that is prose containing LoCoMo-style ids ("see D1:3 and D2:4")
    gives those ids. Which candidates are real is decided later against the known ids.
    """
    if value is None:
        return []
    if isinstance(value, str):
        parts: list[Any] = _SPLIT.split(value)
    elif isinstance(value, list | tuple):
        parts = [x for x in value if x is not None and not isinstance(x, dict | list)]
    else:
        parts = [value]
    out: dict[str, None] = {}
    for part in parts:
        item = clean_id(str(part))
        if not item:
            continue
        found = LOCOMO_ID.findall(item)
        if found and not LOCOMO_ID.fullmatch(item):
            out.update(dict.fromkeys(found))
        else:
            out[item] = None
    return list(out)


def _id_like(tid: str) -> bool:
    """Safe to match without brackets: long enough and not an ordinary word."""
    return len(tid) >= 3 and any(not c.isalpha() for c in tid)


# Free text scanned by token instead of by one alternation of every known id: compiling that alternation
# cost MemR3's router half of its CPU per question at 10k turns (a new pattern per call, hundreds of ids).
# A bracketed id is any bracket's trimmed content; a bare id is a whole token of words joined by single
# separators, which is what the alternation's look-arounds accepted. Ids of another shape (holding a
# bracket, or a bare one with a space or other punctuation) keep the alternation.
_BRACKETED = re.compile(r"\[\s*([^\[\]]*?)\s*\]")
_TOKEN = re.compile(r"\w+(?:[-:.]\w+)*")


class TurnIdMatcher:
    """Matches citations against a fixed set of known turn ids (first-seen order, no duplicates)."""

    def __init__(self, known: Iterable[str]) -> None:
        self.known: dict[str, str] = {}
        for tid in known:
            if tid:
                self.known.setdefault(str(tid).lower(), str(tid))
        self._bare = {key for key, tid in self.known.items() if _id_like(tid)}
        self._pattern: re.Pattern[str] | None = None
        if any("[" in key or "]" in key for key in self.known) or not all(_TOKEN.fullmatch(k) for k in self._bare):
            self._pattern = _alternation(list(self.known.values()))

    def __contains__(self, tid: object) -> bool:
        return isinstance(tid, str) and tid.lower() in self.known

    def canonical(self, tid: str) -> str | None:
        return self.known.get(clean_id(tid).lower())

    def find(self, texts: str | Iterable[str]) -> list[str]:
        """Known ids cited in free text."""
        if not self.known:
            return []
        seen: dict[str, None] = {}
        for text in [texts] if isinstance(texts, str) else texts:
            for tid in self._scan(text or ""):
                seen.setdefault(tid, None)
        return list(seen)

    def _scan(self, text: str) -> list[str]:
        if self._pattern is not None:
            return [self.known[(m.group("b") or m.group("w")).lower()] for m in self._pattern.finditer(text)]
        found = [(m.start(), self.known[key]) for m in _BRACKETED.finditer(text)
                 if (key := m.group(1).lower()) in self.known]
        if self._bare:
            found += [(m.start(), self.known[key]) for m in _TOKEN.finditer(text) if (key := m.group().lower()) in self._bare]
        return [tid for _, tid in sorted(found, key=lambda hit: hit[0])]

    def resolve(self, items: Iterable[str]) -> list[str]:
        """Known ids named by reply items: an exact id, else the known ids cited inside the item."""
        seen: dict[str, None] = {}
        for item in items:
            exact = self.canonical(item)
            for tid in [exact] if exact else self.find(item):
                seen.setdefault(tid, None)
        return list(seen)


def _alternation(ids: list[str]) -> re.Pattern[str] | None:
    """One pattern of every id: in brackets, or bare where it looks like an id and stands alone."""
    ids = sorted(ids, key=len, reverse=True)  # longest first: D1:10 before D1:1
    bare = [t for t in ids if _id_like(t)]
    alternatives = [rf"\[\s*(?P<b>{'|'.join(map(re.escape, ids))})\s*\]"] if ids else []
    if bare:
        # Not inside a longer token: no word character, and no separator joined to one, on either side.
        alternatives.append(rf"(?<!\w)(?<!\w[-:.])(?P<w>{'|'.join(map(re.escape, bare))})(?!\w)(?![-:.]\w)")
    return re.compile("|".join(alternatives), re.I) if alternatives else None
