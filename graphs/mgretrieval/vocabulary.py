"""MGRetrieval's keyword vocabulary V and its keyword → memories map Φ, and the keyword normalisation
both ingestion and retrieval use (README.md in this folder, "What ingestion builds").

V and Φ are stored per namespace in the docs store: the materialised structures under `mg_state`,
one record per processed session under `mg_session` (V and Φ can be rebuilt from them, up to any
session) and K_i / T_i per turn under `mg_turn`. The structures only point at turn ids; the turns
themselves are never rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recollect.dialogue.models import Turn
from recollect.memory.workspace import Workspace

METHOD = "mgretrieval"
VOCAB_KIND = "mg_vocab"  # Chroma kind of the vocabulary-entry embeddings
DOC_STATE = "mg_state"  # docs kind: the materialised V and Φ (key "vocabulary")
DOC_SESSION = "mg_session"  # docs kind: one record per processed session (key = session index)
DOC_TURN = "mg_turn"  # docs kind: K_i and T_i per turn (key = turn id)
STATE_KEY = "vocabulary"
MAX_KEYWORD_WORDS = 4  # the prompt asks for 1–3 words; one word of slack before a keyword is dropped
FALLBACK_MAX = 8

# A small English stopword list for the deterministic fallback extractor and for n-gram matching
# (kept in code: it is data, not prompt text).
_STOPWORD_TEXT = (
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further get got
    had has have having he her here hers herself him himself his how i if in into is it its itself just
    know like me more most my myself no nor not now of off oh ok okay on once only or other our ours
    ourselves out over own really same she should so some such than that the their theirs them themselves
    then there these they this those through to too under until up us very was we well were what when
    where which while who whom why will with would yeah yes you your yours yourself yourselves one thing
    things lot much many going gonna want wanna think thanks thank great good sure hey hi hello wow"""
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_POSSESSIVE = re.compile(r"['’]s\b")
_APOSTROPHE = re.compile(r"['’]")
_NON_WORD = re.compile(r"[^\w\s]|_")
_SPACES = re.compile(r"\s+")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def normalise_keyword(text: Any) -> str:
    """Lower case, possessive 's and punctuation stripped, whitespace collapsed ("Maya's dog!" →
    "maya dog")."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    s = _POSSESSIVE.sub("", text.lower())
    s = _APOSTROPHE.sub("", s)
    s = _NON_WORD.sub(" ", s)
    return _SPACES.sub(" ", s).strip()


def usable_keyword(norm: str) -> bool:
    """A normalised keyword worth indexing: 1–4 words, not only stopwords, not a bare number."""
    if not norm or len(norm) < 2:
        return False
    words = norm.split()
    if len(words) > MAX_KEYWORD_WORDS:
        return False
    return not all(w in STOPWORDS for w in words)


def clean_keywords(raw: Iterable[Any], limit: int) -> list[str]:
    """Normalise, drop unusable ones and duplicates, keep the model's order, cut to `limit`."""
    out: list[str] = []
    for item in raw:
        norm = normalise_keyword(item)
        if usable_keyword(norm) and norm not in out:
            out.append(norm)
        if len(out) >= limit:
            break
    return out


def fallback_keywords(turn: Turn, limit: int = FALLBACK_MAX) -> list[str]:
    """Deterministic K_i when the model gave none: names first, then content tokens of ≥3 letters."""
    tokens = _TOKEN.findall(turn.full_text)
    names = [turn.speaker] + [t for t in tokens if t[:1].isupper()]
    words = [t for t in tokens if len(t) >= 3]
    out: list[str] = []
    for tok in [*names, *words]:
        norm = normalise_keyword(tok)
        if norm and norm not in STOPWORDS and len(norm) >= 2 and norm not in out:
            out.append(norm)
        if len(out) >= limit:
            break
    return out


def _stem(word: str) -> str:
    """A crude stem for grounding: plural "s" off, then the first five letters ("paintings" → "paint")."""
    w = word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
    return w[:5]


def grounded_keywords(keywords: Sequence[str], turn: Turn, minimum: int) -> tuple[list[str], int]:
    """`mg_keyword_grounding`: the keywords that share a content word (by `_stem`) with the turn (its text,
    caption and speaker), topped up to `minimum` with the turn's own words (`fallback_keywords`); returns
    them and how many were dropped. Keywords the small model carried over from a neighbouring turn, or
    copied from the prompt, name no word of the turn and would file it under another turn's subject."""
    own = {_stem(w) for w in normalise_keyword(f"{turn.speaker} {turn.full_text}").split() if w not in STOPWORDS}
    kept = [kw for kw in keywords
            if any(_stem(w) in own for w in kw.split() if w not in STOPWORDS)]
    dropped = len(keywords) - len(kept)
    speaker = normalise_keyword(turn.speaker)  # the extractor adds it to every turn anyway
    for kw in fallback_keywords(turn, FALLBACK_MAX + 1):
        if len(kept) >= minimum:
            break
        if kw not in kept and kw != speaker:
            kept.append(kw)
    return kept, dropped


def question_ngrams(text: str, max_n: int = MAX_KEYWORD_WORDS) -> list[str]:
    """Every 1..max_n-word n-gram of the normalised text, by position, longest first at a position."""
    words = normalise_keyword(text).split()
    out: list[str] = []
    for i in range(len(words)):
        for n in range(min(max_n, len(words) - i), 0, -1):
            gram = " ".join(words[i : i + n])
            if gram not in out:
                out.append(gram)
    return out


@dataclass
class KeywordVocabulary:
    """V (entries in insertion order) and Φ (entry → turn ids in conversation order)."""

    entries: list[str] = field(default_factory=list)
    phi: dict[str, list[str]] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)  # chain hash after each processed session
    sessions: list[int] = field(default_factory=list)

    def __contains__(self, entry: object) -> bool:
        return entry in self.phi

    def __len__(self) -> int:
        return len(self.entries)

    def add_entry(self, entry: str) -> bool:
        if entry in self.phi:
            return False
        self.entries.append(entry)
        self.phi[entry] = []
        return True

    def index_turn(self, entry: str, turn_id: str) -> None:
        ids = self.phi.setdefault(entry, [])
        if entry not in self.entries:
            self.entries.append(entry)
        if turn_id not in ids:
            ids.append(turn_id)  # turns arrive in conversation order, so the list stays ordered

    def memories(self, entry: str) -> list[str]:
        return list(self.phi.get(entry, ()))

    def as_doc(self) -> dict[str, Any]:
        return {"entries": self.entries, "phi": self.phi, "chain": self.chain, "sessions": self.sessions}

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> KeywordVocabulary:
        if not doc:
            return cls()
        return cls(
            entries=list(doc.get("entries") or []),
            phi={k: list(v) for k, v in (doc.get("phi") or {}).items()},
            chain=list(doc.get("chain") or []),
            sessions=list(doc.get("sessions") or []),
        )

    @classmethod
    def load(cls, ws: Workspace, namespace: str, upto_session: int | None = None) -> KeywordVocabulary:
        """The stored vocabulary; with `upto_session`, V and Φ as they were after that session."""
        if upto_session is None:
            return cls.from_doc(ws.docs.get(namespace, DOC_STATE, STATE_KEY))
        return cls.replay([r for r in session_records(ws, namespace) if r["index"] <= upto_session])

    @classmethod
    def replay(cls, records: Sequence[dict[str, Any]]) -> KeywordVocabulary:
        """Rebuild V and Φ from per-session records (new entries, then T_i of each turn in order)."""
        vocab = cls()
        for rec in records:
            for entry in rec["new_entries"]:
                vocab.add_entry(entry)
            for tid, terms in rec["terms"]:
                for v in terms:
                    vocab.index_turn(v, tid)
            vocab.chain.append(rec["chain"])
            vocab.sessions.append(rec["index"])
        return vocab


def session_records(ws: Workspace, namespace: str) -> list[dict[str, Any]]:
    """The per-session build records in processing order (for reports and tests)."""
    records = ws.docs.items(namespace, DOC_SESSION).values()
    return sorted((r for r in records if r.get("chain") != "stale"), key=lambda r: r["position"])
