"""MGRetrieval's memory storage: the keyword vocabulary V and the keyword → memories map Φ.

Paper §3.1 (eqs. 1–6), built per session instead of per memory (specs/methods/mgretrieval.md §2):

1. **Extraction (p_s1)**, one call per session: K_i for every turn (the memory unit is one turn).
2. **Deterministic pre-match**: a normalised keyword already in V is matched with no call.
3. **Matching (p_s2)**, at most one call per session: each remaining keyword that has an
   embedding shortlist (entries of V with cosine ≥ `mg_match_min_sim`) may be mapped to one
   shortlist entry; keywords without a shortlist are new with no call.
4. **Update** (eqs. 3–6): T_i = K_i with matched keywords replaced by their entry; unmatched
   keywords join V; Φ(v) gains the turn for every v in T_i.

Both calls answer in `MGRetrievalContext.mg_ingest_format`: "compact" (numbers and short strings, about half the
generated tokens) or "json" (the spec's keyed objects); either shape is parsed in either mode and goes
through the same validation, so equivalent replies build the same V, Φ and T_i.

Sessions are processed strictly in order because V after session s depends only on sessions 1..s.
Each session's result is written in one transaction (a per-session record, the materialised
vocabulary and the per-turn T_i), so a crash leaves a consistent prefix and the next run goes on
from there. Every LLM reply is cached by content hash, so re-ingesting makes no call; a changed
session triggers a replay from the first changed session, which is free up to that point.
Original turns are never rewritten: the structures only point at turn ids.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field, field_validator, model_validator

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.llm.cache import LLMCache, cache_key
from recollect.llm.lenient import as_str_list
from recollect.llm.models import get_chat_model, model_name
from recollect.llm.structured import StructuredResult, call_structured
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.memory.embeddings import embedder_name
from recollect.memory.vectors import Unit, VectorIndex
from recollect.memory.workspace import Workspace
from recollect.prompts import load_prompt, prompt_hash, render_prompt
from recollect.settings import get_settings

METHOD = "mgretrieval"
VOCAB_KIND = "mg_vocab"  # Chroma kind of the vocabulary-entry embeddings
DOC_STATE = "mg_state"  # docs kind: the materialised V and Φ (key "vocabulary")
DOC_SESSION = "mg_session"  # docs kind: one record per processed session (key = session index)
DOC_TURN = "mg_turn"  # docs kind: K_i and T_i per turn (key = turn id)
STATE_KEY = "vocabulary"
MAX_KEYWORD_WORDS = 4  # the prompt asks for 1–3 words; one word of slack before a keyword is dropped
FALLBACK_MAX = 8
# Compact p_s1 schema cap: characters per keyword in a turn's comma-separated keyword string (a 1–3
# word keyword plus ", " fits easily); it stops a looping string without cutting a normal reply.
CHARS_PER_KEYWORD = 24
# Prompt templates of calls 1 and 2 per `MGRetrievalContext.mg_ingest_format`.
PROMPTS = {
    "json": ("extract_keywords", "match_vocabulary"),
    "compact": ("extract_keywords_compact", "match_vocabulary_compact"),
}

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
    """Lower case, possessive 's and punctuation stripped, whitespace collapsed ("Maya's dog!" → "maya dog")."""
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


# --- the two structures -------------------------------------------------------------------------


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


@dataclass(frozen=True)
class KeywordGroup:
    """One pyramid node P: a keyword combination, its level and s(P) = ∩ Φ(v) (eq. 10)."""

    level: int
    keywords: tuple[str, ...]
    ids: tuple[str, ...]
    order: tuple[int, ...]  # indexes of the keywords in Q (the tie-break)

    @property
    def size(self) -> int:
        return len(self.ids)

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "keywords": list(self.keywords), "size": self.size, "ids": list(self.ids)}


class KeywordPyramid:
    """All non-empty keyword combinations of Q, top level first, by |s(P)| descending in a level."""

    @staticmethod
    def build(keywords: Sequence[str], phi: dict[str, list[str]], turn_order: dict[str, int] | None = None) -> list[KeywordGroup]:
        q = list(dict.fromkeys(keywords))
        pos = turn_order or {}
        groups: list[KeywordGroup] = []
        for level in range(len(q), 0, -1):
            level_groups = []
            for combo in combinations(range(len(q)), level):  # lexicographic index tuples = Q order
                sets = [set(phi.get(q[i], ())) for i in combo]
                common = set.intersection(*sets) if sets else set()
                if not common:
                    continue  # empty intersections never enter the pyramid
                ids = tuple(sorted(common, key=lambda t: (pos.get(t, 1 << 30), t)))
                level_groups.append(KeywordGroup(level, tuple(q[i] for i in combo), ids, combo))
            # Python's sort is stable, so equal sizes keep the lexicographic (Q-order) tie-break.
            level_groups.sort(key=lambda g: -g.size)
            groups.extend(level_groups)
        return groups


# --- LLM reply schemas ----------------------------------------------------------------------------
#
# Two reply formats (`MGRetrievalContext.mg_ingest_format`), parsed by the same lenient models so that a reply
# in either shape is understood in either mode:
# - "json" (the spec's): {"turns": [{"id": "D1:3", "keywords": [...]}]} and
#   {"matches": [{"keyword": "hiking", "entry": "hike"}]}.
# - "compact": {"3": "dog, adoption"} (turn number in the prompt → its keywords as one comma-separated
#   string: one separator token per keyword instead of a closing and an opening quote) and
#   {"1": 2, "2": 0} (candidate number → shortlist entry number, 0 = new): no repeated keys, no echoed
#   keyword text. Keyword lists ({"3": ["dog", "adoption"]}) are accepted as well.
# Both are normalised to the json shape before validation, so the cached value and everything after
# the parse is the same for the two formats.


def _turn_items(v: Any) -> Any:
    """Turn replies → `[{"id", "keywords"}]`: from a map id → keywords, a list of items, a list of
    such maps, or a bare list of keyword lists (positional: ids "1", "2", …)."""
    if isinstance(v, dict):  # {"D1:1": [...], ...} or {"1": [...], ...}
        return [{"id": k, "keywords": kw} for k, kw in v.items()]
    if not isinstance(v, list):
        return v
    out: list[Any] = []
    for pos, item in enumerate(v, 1):
        if isinstance(item, dict) and not {"id", "keywords"} & set(item):
            out.extend({"id": k, "keywords": kw} for k, kw in item.items())
        elif isinstance(item, list):
            out.append({"id": str(pos), "keywords": item})
        else:
            out.append(item)
    return out


def _match_items(v: Any) -> Any:
    """A list of match replies → `[{"keyword", "entry"}]`; pairs like [1, 2] are (candidate, entry)."""
    if isinstance(v, dict):  # {"hiking": "hike"} or {"1": 2}
        return [{"keyword": k, "entry": e} for k, e in v.items()]
    if not isinstance(v, list):
        return v
    out: list[Any] = []
    for item in v:
        if isinstance(item, list | tuple) and item:
            out.append({"keyword": item[0], "entry": item[1] if len(item) > 1 else None})
        elif isinstance(item, dict) and not {"keyword", "entry"} & set(item):  # [{"1": 2}, {"2": 0}]
            out.extend({"keyword": k, "entry": e} for k, e in item.items())
        else:
            out.append(item)
    return out


def _keyed_by_numbers(data: dict[str, Any]) -> bool:
    """A map keyed by turn / candidate numbers or turn ids ("1", "D1:3"). Other unwrapped objects
    ({"answer": …}, {"keywords": [...]}) stay invalid, so the model gets its retry as before."""
    return any(any(c.isdigit() for c in str(k)) for k in data)


def _single_list(data: dict[str, Any]) -> list[Any] | None:
    """{"pairs": [[1, 2], ...]}: a one-key wrapper around a list of items (lists or objects)."""
    if len(data) == 1:
        (only,) = data.values()
        if isinstance(only, list) and only and all(isinstance(x, list | dict) for x in only):
            return only
    return None


class TurnKeywords(BaseModel):
    id: str
    keywords: list[str] = Field(default_factory=list)

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        return str(v).strip().strip("[]").strip() if v is not None else v

    @field_validator("keywords", mode="before")
    @classmethod
    def _kw(cls, v: Any) -> Any:
        return as_str_list(v)


# The json format's schemas: their docstrings are part of the schema sent, so they stay as they were.
class ExtractionReply(BaseModel):
    """p_s1: keywords for every turn of the session."""

    turns: list[TurnKeywords]

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if isinstance(data, list):  # a bare list of turn items or of positional keyword lists
            return {"turns": data}
        if isinstance(data, dict) and "turns" not in data:
            wrapped = _single_list(data)  # {"keywords": [["dog"], ["cat"]]}
            if wrapped is not None:
                return {"turns": wrapped}
            if _keyed_by_numbers(data):  # the compact shape {"1": "dog, cat", ...}
                return {"turns": data}
        return data

    @field_validator("turns", mode="before")
    @classmethod
    def _turns(cls, v: Any) -> Any:
        return _turn_items(v)


class KeywordMatch(BaseModel):
    keyword: str
    entry: str | None = None

    @field_validator("entry", mode="before")
    @classmethod
    def _entry(cls, v: Any) -> Any:
        if isinstance(v, list | tuple):  # {"1": [2]}
            v = v[0] if v else None
        if isinstance(v, dict):  # {"1": {"entry": 2}}
            v = v.get("entry")
        if v is None or isinstance(v, bool):
            return None
        if str(v).strip().lower() in ("", "0", "null", "none", "new", "n/a"):  # 0 = new in the compact format
            return None
        return str(v).strip()

    @field_validator("keyword", mode="before")
    @classmethod
    def _keyword(cls, v: Any) -> Any:
        return "" if v is None else str(v).strip()


class MatchReply(BaseModel):
    """p_s2: for each candidate keyword, one of its shortlist entries or null."""

    matches: list[KeywordMatch]

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if isinstance(data, list):  # [[1, 2], [2, 0]]
            return {"matches": data}
        if isinstance(data, dict) and "matches" not in data:
            wrapped = _single_list(data)  # {"pairs": [[1, 2], [2, 0]]}
            if wrapped is not None:
                return {"matches": wrapped}
            if _keyed_by_numbers(data):  # the compact shape {"1": 2, ...}
                return {"matches": data}
        return data

    @field_validator("matches", mode="before")
    @classmethod
    def _matches(cls, v: Any) -> Any:
        return _match_items(v)


class _FixedSchema:
    """A reply model whose JSON schema (sent to the endpoint) is given, not derived from its fields."""

    reply_schema: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if cls.reply_schema:
            return copy.deepcopy(cls.reply_schema)
        return super().model_json_schema(*args, **kwargs)  # type: ignore[misc]


class CompactExtractionReply(_FixedSchema, ExtractionReply):
    """p_s1 in the compact format; parses (and dumps) like `ExtractionReply`."""


class CompactMatchReply(_FixedSchema, MatchReply):
    """p_s2 in the compact format; parses (and dumps) like `MatchReply`."""


@lru_cache(maxsize=256)
def compact_extraction_model(n_turns: int, k: int) -> type[CompactExtractionReply]:
    """Schema {"1": "kw, kw", …, "n": "…"}: every turn number once, in order.

    Under a grammar (llama.cpp) the keys are forced, so no turn is skipped and no id invented, and a
    turn's string cannot run on past about k keywords: the reply is bounded at n·k·24 characters
    whatever the session length, and `max_tokens` (60 + 8·k·n) covers a normal reply several times.
    """
    keys = [str(i) for i in range(1, n_turns + 1)]
    item = {"type": "string", "maxLength": CHARS_PER_KEYWORD * k}
    schema = {"title": "MGKeywords", "type": "object", "properties": {key: item for key in keys},
              "required": keys, "additionalProperties": False}
    return type("MGKeywords", (CompactExtractionReply,), {"__module__": __name__, "reply_schema": schema})


@lru_cache(maxsize=256)
def compact_match_model(sizes: tuple[int, ...]) -> type[CompactMatchReply]:
    """Schema {"1": 0..|shortlist 1|, …}: one entry number per candidate, in order (0 = new)."""
    keys = [str(i) for i in range(1, len(sizes) + 1)]
    props = {key: {"type": "integer", "minimum": 0, "maximum": size} for key, size in zip(keys, sizes, strict=True)}
    schema = {"title": "MGMatches", "type": "object", "properties": props, "required": keys,
              "additionalProperties": False}
    return type("MGMatches", (CompactMatchReply,), {"__module__": __name__, "reply_schema": schema})


def _number(raw: Any) -> int | None:
    """A reply's 1-based number ("3", 3, "#3"), else None."""
    if isinstance(raw, bool):
        return None
    s = str(raw).strip().lstrip("#")
    return int(s) if s.isdigit() else None


def resolve_turn(raw: Any, batch: Sequence[Turn], numbers_first: bool) -> str | None:
    """The batch turn a reply key names: its turn number in the prompt or its id; unknown → None.

    The compact prompt numbers the turns, so there a number is read as a position first (a dataset
    whose ids are bare numbers stays unambiguous); the json prompt shows ids, so an id comes first.
    """
    ids = [t.id for t in batch]
    key = "" if raw is None else str(raw).strip()
    pos = _number(key)
    by_pos = ids[pos - 1] if pos is not None and 1 <= pos <= len(ids) else None
    if numbers_first and by_pos:
        return by_pos
    return key if key in ids else by_pos


def resolve_candidate(raw: Any, batch: Sequence[tuple[str, list[str]]], candidates: dict[str, list[str]], numbers_first: bool) -> str | None:
    """The candidate keyword a match reply names: its number in the listing or its text."""
    pos = _number(raw)
    by_pos = batch[pos - 1][0] if pos is not None and 1 <= pos <= len(batch) else None
    if numbers_first and by_pos:
        return by_pos
    text = normalise_keyword(raw)
    return text if text in candidates else by_pos


def resolve_entry(raw: Any, shortlist: Sequence[str], numbers_first: bool) -> tuple[str | None, str | None]:
    """(the shortlist entry a match reply names or None, why it was rejected or None).

    Entries are numbered 1.. in the compact listing; 0 / null = new. A number out of range and a text
    that is not in the keyword's shortlist both count as null.
    """
    if raw is None:
        return None, None
    pos = _number(raw)
    by_pos = shortlist[pos - 1] if pos is not None and 1 <= pos <= len(shortlist) else None
    if numbers_first and by_pos:
        return by_pos, None
    text = normalise_keyword(raw)
    if text in shortlist:
        return text, None
    if by_pos:
        return by_pos, None
    if not text or pos == 0:
        return None, None
    return None, ("entry number out of range" if pos is not None else "not in the keyword's shortlist")


# --- the builder ----------------------------------------------------------------------------------


def render_turn_line(turn: Turn, number: int | None = None) -> str:
    """`[D1:3] Ann: text` (json format), or with the turn's number in its batch (compact format)."""
    return f"[{turn.id if number is None else number}] {turn.speaker}: {turn.full_text}"


def render_candidate_line(number: int, keyword: str, shortlist: Sequence[str], compact: bool) -> str:
    """`1. hiking -> hike | trail` (json format) or `1. hiking -> 1) hike, 2) trail` (compact: entries numbered)."""
    if compact:
        return f"{number}. {keyword} -> " + ", ".join(f"{j}) {e}" for j, e in enumerate(shortlist, 1))
    return f"{number}. {keyword} -> {' | '.join(shortlist)}"


def _session_date(session: Session) -> str:
    return session.date or session.date_time or "unknown date"


def settings_fingerprint(ctx: MGRetrievalContext, model: Any, embedder: str) -> str:
    """Everything besides the session text that can change V and Φ: part of each chain hash."""
    parts = {
        "k": ctx.mg_keywords_per_memory,
        "shortlist": ctx.mg_match_shortlist,
        "min_sim": ctx.mg_match_min_sim,
        "surface": ctx.mg_keep_surface_forms,
        "model": model_name(model),
        "embedder": embedder,
        "prompts": [prompt_hash(METHOD, name) for name in PROMPTS[ctx.mg_ingest_format]],
    }
    if ctx.mg_ingest_format != "json":
        # The json format keeps the fingerprint it had before the setting existed, so stores built
        # then stay valid under it; any other format is part of the chain (switching replays).
        parts["format"] = ctx.mg_ingest_format
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def chain_hashes(sessions: Sequence[Session], fingerprint: str) -> list[str]:
    out, prev = [], fingerprint
    for s in sessions:
        prev = hashlib.sha256(f"{prev}|{s.index}|{s.content_hash()}".encode()).hexdigest()[:32]
        out.append(prev)
    return out


class VocabularyBuilder:
    """Runs p_s1 → pre-match → p_s2 → update for one session at a time, over a live vocabulary."""

    def __init__(self, ws: Workspace, namespace: str, ctx: MGRetrievalContext, report: Any) -> None:
        self.ws = ws
        self.namespace = namespace
        self.ctx = ctx
        self.report = report
        self.model = get_chat_model(ctx, role="aux")
        self.cache = LLMCache(ws.docs)
        self.temperature = get_settings().llm_temperature
        self.index: VectorIndex = ws.index(VOCAB_KIND, namespace)
        self.vocab = KeywordVocabulary()
        self.usage: dict[str, Any] = {}
        self._vectors: dict[str, np.ndarray] = {}

    # -- embeddings of V, kept in memory so shortlists see exactly V_{s-1}
    def _ensure_vectors(self, entries: Sequence[str]) -> None:
        missing = [e for e in entries if e not in self._vectors]
        if not missing:
            return
        stored: dict[str, Any] = {}
        try:
            got = self.index.collection.get(ids=missing, include=["embeddings"])
            stored = dict(zip(got["ids"], got["embeddings"], strict=False))
        except Exception:  # an old or partial collection: embedding again is always correct
            stored = {}
        todo = [e for e in missing if stored.get(e) is None]
        fresh = dict(zip(todo, self.ws.embeddings.embed_documents(todo), strict=False)) if todo else {}
        for e in missing:
            vec = np.asarray(stored[e] if stored.get(e) is not None else fresh[e], dtype=np.float32)
            n = float(np.linalg.norm(vec))
            self._vectors[e] = vec / n if n else vec

    def shortlists(self, keywords: Sequence[str]) -> dict[str, list[str]]:
        """Up to `mg_match_shortlist` entries of the current V with cosine ≥ `mg_match_min_sim`."""
        if not keywords or not self.vocab.entries or self.ctx.mg_match_shortlist <= 0:
            return {}
        entries = list(self.vocab.entries)
        self._ensure_vectors(entries)
        matrix = np.vstack([self._vectors[e] for e in entries])
        kw_vecs = np.asarray(self.ws.embeddings.embed_documents(list(keywords)), dtype=np.float32)
        norms = np.linalg.norm(kw_vecs, axis=1, keepdims=True)
        kw_vecs = kw_vecs / np.where(norms == 0, 1, norms)
        sims = kw_vecs @ matrix.T
        out: dict[str, list[str]] = {}
        for row, kw in enumerate(keywords):
            order = np.argsort(-sims[row], kind="stable")  # ties keep V's insertion order
            picked = [entries[j] for j in order[: self.ctx.mg_match_shortlist] if sims[row, j] >= self.ctx.mg_match_min_sim]
            if picked:
                out[kw] = picked
        return out

    @property
    def compact(self) -> bool:
        return self.ctx.mg_ingest_format == "compact"

    # -- LLM calls (cached)
    def _cached_call(self, call: str, prompt_name: str, payload: Any, prompt: str, schema: type[BaseModel],
                     max_tokens: int) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """One cached structured call. The key holds the prompt template's name and hash (so the two
        formats never share a reply) and the usage is counted under `mg_<call>` in both formats."""
        key = cache_key(self.namespace, METHOD, prompt_name, model_name(self.model), self.temperature, payload)
        hit = self.cache.get(key)
        if hit is not None:
            self.report.cached_calls += 1
            return hit.get("value"), {"cached": True, **({"fallback": True, "error": hit.get("error")} if hit.get("value") is None else {})}
        res: StructuredResult[Any] = call_structured(
            self.model, [HumanMessage(content=prompt)], schema, node=f"mg_{call}",
            method=self.ctx.structured_method, max_tokens=max_tokens,
        )
        self.report.add_usage(res.usage)
        self.usage = merge_usage(self.usage, res.usage)
        value = res.value.model_dump() if res.value is not None else None
        self.cache.put(key, {"value": value, "error": res.error})
        return value, ({} if value is not None else res.failure_note())

    def _extraction_batches(self, session: Session) -> list[list[Turn]]:
        """One batch per session unless the session alone would overflow the prompt budget."""
        budget = self.ctx.max_prompt_tokens - estimate_tokens(load_prompt(METHOD, PROMPTS[self.ctx.mg_ingest_format][0])) - 100
        batches: list[list[Turn]] = [[]]
        used = 0
        for turn in session.turns:
            cost = estimate_tokens(render_turn_line(turn, len(batches[-1]) + 1 if self.compact else None))
            if batches[-1] and used + cost > budget:
                batches.append([])
                used = 0
            batches[-1].append(turn)
            used += cost
        return [b for b in batches if b]

    def extract(self, session: Session) -> tuple[dict[str, list[str]], list[str], list[dict[str, Any]]]:
        """K_i for every turn of the session; returns (keywords, fallback turn ids, notes)."""
        k = self.ctx.mg_keywords_per_memory
        found: dict[str, list[str]] = {}
        notes: list[dict[str, Any]] = []
        name = PROMPTS[self.ctx.mg_ingest_format][0]
        for batch in self._extraction_batches(session):
            lines = "\n".join(render_turn_line(t, i if self.compact else None) for i, t in enumerate(batch, 1))
            prompt = render_prompt(METHOD, name, date=_session_date(session), turns=lines, max_keywords=k)
            payload: dict[str, Any] = {"date": _session_date(session), "turns": lines, "k": k}
            schema: type[BaseModel] = ExtractionReply
            if self.compact:
                payload["format"] = "compact"
                schema = compact_extraction_model(len(batch), k)
            value, note = self._cached_call("extract_keywords", name, payload, prompt, schema,
                                            max_tokens=60 + 8 * k * len(batch))
            if note.get("fallback"):
                notes.append({"call": "extract_keywords", **note})
            for item in (value or {}).get("turns", []):
                tid = resolve_turn(item.get("id"), batch, numbers_first=self.compact)
                if tid is not None and tid not in found:  # unknown ids are dropped
                    kws = clean_keywords(item.get("keywords") or [], k)
                    if kws:
                        found[tid] = kws
        out: dict[str, list[str]] = {}
        fallback: list[str] = []
        for turn in session.turns:
            kws = found.get(turn.id)
            if not kws:
                kws = fallback_keywords(turn, min(FALLBACK_MAX, k))
                fallback.append(turn.id)
            # Our choice: the speaker's name is always a keyword, so "who said it" can intersect.
            speaker = normalise_keyword(turn.speaker)
            if usable_keyword(speaker) and speaker not in kws:
                kws = [*kws, speaker]
            out[turn.id] = kws
        return out, fallback, notes

    def match(self, candidates: dict[str, list[str]]) -> tuple[dict[str, str | None], list[dict[str, Any]]]:
        """p_s2 over the candidates and their shortlists; entries outside a shortlist count as null."""
        if not candidates:
            return {}, []
        items = sorted(candidates.items())  # canonical order: the cache key must not depend on set order
        name = PROMPTS[self.ctx.mg_ingest_format][1]
        budget = self.ctx.max_prompt_tokens - estimate_tokens(load_prompt(METHOD, name)) - 100
        batches: list[list[tuple[str, list[str]]]] = [[]]
        used = 0
        for kw, short in items:
            cost = (estimate_tokens(render_candidate_line(len(batches[-1]) + 1, kw, short, compact=True)) if self.compact
                    else estimate_tokens(kw + " " + " | ".join(short)) + 4)
            if batches[-1] and used + cost > budget:
                batches.append([])
                used = 0
            batches[-1].append((kw, short))
            used += cost
        result: dict[str, str | None] = {kw: None for kw in candidates}
        notes: list[dict[str, Any]] = []
        for batch in batches:
            listing = "\n".join(render_candidate_line(i, kw, short, self.compact) for i, (kw, short) in enumerate(batch, 1))
            prompt = render_prompt(METHOD, name, candidates=listing)
            payload: Any = [[kw, short] for kw, short in batch]
            schema: type[BaseModel] = MatchReply
            max_tokens = 40 + 20 * len(batch)
            if self.compact:
                payload = {"format": "compact", "candidates": payload}
                schema = compact_match_model(tuple(len(short) for _, short in batch))
                max_tokens = 30 + 8 * len(batch)  # `"12": 3, ` is about 6 tokens
            value, note = self._cached_call("match_vocabulary", name, payload, prompt, schema, max_tokens=max_tokens)
            if note.get("fallback"):
                notes.append({"call": "match_vocabulary", **note})
            for m in (value or {}).get("matches", []):
                kw = resolve_candidate(m.get("keyword"), batch, candidates, numbers_first=self.compact)
                if kw is None:
                    continue  # names no candidate
                entry, why = resolve_entry(m.get("entry"), candidates[kw], numbers_first=self.compact)
                if entry and result.get(kw) is None:
                    result[kw] = entry
                elif why:
                    notes.append({"rejected_match": [kw, str(m.get("entry"))], "why": why})
        return result, notes

    def process(self, session: Session, chain: str, position: int) -> dict[str, Any]:
        """One session: extraction, pre-match, matching, update. Returns the session record."""
        self.usage = {}
        keywords, fallback, notes = self.extract(session)
        distinct = list(dict.fromkeys(kw for kws in keywords.values() for kw in kws))
        prematched = [kw for kw in distinct if kw in self.vocab]
        unseen = [kw for kw in distinct if kw not in self.vocab]
        shortlists = self.shortlists(unseen)
        matches, match_notes = self.match(shortlists)
        mapping = {kw: matches.get(kw) for kw in unseen}

        new_entries: list[str] = []
        terms: list[list[Any]] = []
        for turn in session.turns:
            t_i: list[str] = []
            for kw in keywords[turn.id]:
                entry = mapping.get(kw) if kw in mapping else None
                if entry:
                    t_i.append(entry)
                    if self.ctx.mg_keep_surface_forms:
                        t_i.append(kw)  # eq. 3 read literally: the surface form is an entry too
                else:
                    t_i.append(kw)
            t_i = list(dict.fromkeys(t_i))
            for v in t_i:
                if v not in self.vocab:
                    self.vocab.add_entry(v)
                    new_entries.append(v)
                self.vocab.index_turn(v, turn.id)
            terms.append([turn.id, t_i])
        self.vocab.chain.append(chain)
        self.vocab.sessions.append(session.index)
        self._ensure_vectors(new_entries)
        return {
            "index": session.index,
            "position": position,
            "chain": chain,
            "hash": session.content_hash(),
            "keywords": [[tid, keywords[tid]] for tid in keywords],
            "terms": terms,
            "new_entries": new_entries,
            "prematched": prematched,
            "matched": {k: v for k, v in mapping.items() if v},
            "shortlisted": len(shortlists),
            "fallback_turns": fallback,
            "notes": notes + match_notes,
            "usage": self.usage,
        }

    def save(self, record: dict[str, Any], session: Session) -> None:
        """One transaction per session: its record, the materialised V/Φ and every T_i."""
        kw = dict((tid, k) for tid, k in record["keywords"])
        with self.ws.docs.transaction():
            self.ws.docs.put(self.namespace, DOC_SESSION, str(session.index), record)
            self.ws.docs.put(self.namespace, DOC_STATE, STATE_KEY, self.vocab.as_doc())
            self.ws.docs.put_many(self.namespace, DOC_TURN, {
                tid: {"session": session.index, "keywords": kw[tid], "terms": t_i, "fallback": tid in record["fallback_turns"]}
                for tid, t_i in record["terms"]
            })

    def sync_index(self) -> int:
        """Make the `mg_vocab` Chroma collection hold exactly V (idempotent; re-embeds nothing known)."""
        wanted = set(self.vocab.entries)
        stale = sorted({u.id for u in self.index.all()} - wanted)
        self.index.delete(stale)
        units = [Unit(id=e, text=e, turn_ids=[], metadata={"entry": e}) for e in self.vocab.entries]
        return self.index.upsert(units)


def build(ws: Workspace, namespace: str, conversation: Conversation, ctx: MGRetrievalContext, progress: Any) -> Any:
    """The registered MGRetrieval builder (see `recollect.graphs.registry.BUILDERS`)."""
    from recollect.memory.build import BuildReport

    start = time.monotonic()
    report = BuildReport(METHOD)
    builder = VocabularyBuilder(ws, namespace, ctx, report)
    sessions = sorted(conversation.sessions, key=lambda s: s.index)
    chains = chain_hashes(sessions, settings_fingerprint(ctx, builder.model, embedder_name(ws.embeddings)))

    stored = KeywordVocabulary.load(ws, namespace)
    keep = 0
    while keep < min(len(stored.chain), len(chains)) and stored.chain[keep] == chains[keep]:
        keep += 1
    if keep == len(stored.chain):
        builder.vocab = stored  # the common case: everything stored is still valid, extend it
    else:
        # A stored session changed (or the settings did): rebuild V/Φ for the valid prefix from the
        # per-session records and replay the rest; the LLM cache makes unchanged sessions free.
        records = sorted(ws.docs.items(namespace, DOC_SESSION).values(), key=lambda r: r["position"])
        valid = [r for r in records if r["position"] < keep and r["chain"] == chains[r["position"]]]
        builder.vocab = KeywordVocabulary.replay(valid)
        with ws.docs.transaction():
            for r in records:
                if r not in valid:
                    ws.docs.put(namespace, DOC_SESSION, str(r["index"]), {**r, "position": 1 << 30, "chain": "stale"})
            ws.docs.put(namespace, DOC_STATE, STATE_KEY, builder.vocab.as_doc())
        report.fallbacks.append(f"replayed from session position {keep} (stored sessions changed)")

    todo = list(enumerate(sessions))[keep:]
    for position, session in progress(todo, "mgretrieval sessions"):
        record = builder.process(session, chains[position], position)
        builder.save(record, session)
        report.sessions += 1
        if record["fallback_turns"]:
            report.fallbacks.append(f"session {session.index}: fallback keywords for {', '.join(record['fallback_turns'])}")
        for note in record["notes"]:
            if note.get("fallback"):
                report.fallbacks.append(f"session {session.index}: {note['call']} failed, safe fallback used")
    report.embedded = builder.sync_index()
    report.seconds = round(time.monotonic() - start, 3)
    return report


def session_records(ws: Workspace, namespace: str) -> list[dict[str, Any]]:
    """The per-session build records in processing order (for reports and tests)."""
    records = ws.docs.items(namespace, DOC_SESSION).values()
    return sorted((r for r in records if r.get("chain") != "stale"), key=lambda r: r["position"])
