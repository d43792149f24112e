"""MRAgent's cues: the one normalisation of cues and tags, relation matching, and the fallback extractor.

Ingestion stores cues under `cue_norm`; the seed and the tools match question cues with `cue_tokens`
and `cue_relation` (equal, contained, or Jaccard at least `mra_jaccard`; README.md in this folder).
"""

from __future__ import annotations

import re

MAX_CUES = 30  # cues kept per sentence
FALLBACK_CUES = 8  # tokens taken when a sentence has no valid cue
_TOKEN = re.compile(r"[a-z0-9]+")

_STOPWORD_TEXT = """a an the and or but if then so of to in on at by for with from about as into over after before
    is are was were be been being am do does did done have has had having i me my mine we us our you your
    he him his she her hers it its they them their this that these those there here what which who whom
    whose when where why how not no yes can could will would shall should may might must just also very
    really too than some any all each every much many more most other such own same only s t don
    oh hey hi hello yeah ok okay wow thanks thank so get got gonna like lot lots"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def cue_tokens(text: str) -> frozenset[str]:
    """The normalised token set of a cue: lower case, alphanumeric tokens, stopwords dropped
    (unless the cue is made only of stopwords, so it still has a form)."""
    toks = _TOKEN.findall((text or "").lower())
    content = [t for t in toks if t not in STOPWORDS]
    return frozenset(content or toks)


def cue_norm(text: str) -> str:
    """The snake_case key of a cue's token set: the one normalisation used for cues and tags."""
    return "_".join(sorted(cue_tokens(text)))


def cue_relation(a: frozenset[str], b: frozenset[str], jaccard: float) -> str | None:
    """How two cue token sets relate: `equal`, `contain`, `jaccard`, or None (no match)."""
    if not a or not b:
        return None
    if a == b:
        return "equal"
    if a <= b or b <= a:
        return "contain"
    if len(a & b) / len(a | b) >= jaccard - 1e-9:
        return "jaccard"
    return None


def fallback_cues(text: str, limit: int = FALLBACK_CUES) -> list[str]:
    """Non-stopword tokens of at least 3 characters, in order, deduplicated. A contraction of a
    stopword ("I'm", "it's", "don't") counts as a stopword."""
    out: list[str] = []
    for tok in re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", text or ""):
        low = tok.lower().strip("'-")
        if low.split("'")[0] in STOPWORDS:  # covers the plain stopword too ("the".split("'")[0] == "the")
            continue
        if len(low) >= 3 and low not in (o.lower() for o in out):
            out.append(tok.strip("'-"))
        if len(out) >= limit:
            break
    return out


# --- question cues without a call (mra_question_cues = "lexical")

QUESTION_CUES = 6  # the spec's cue call names 1 to 6 cues
FORM_EXTRA = 3  # a word form adds at most this many letters to the shorter word ("camp" -> "camping")
FORM_STEM = 4  # ... which has at least this many letters ("art" has no forms: "article", "artist")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r")(?:\s+of)?,?\s+(\d{4})\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of)\s+(\d{4})\b", re.I)
_LAST_DAY = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February 29: the window only needs to contain


_ENDINGS = ("ing", "ed", "es", "s", "e")  # the inflections a form may differ by ("dance", "dancing", "danced")


def _stem(word: str) -> str:
    for end in _ENDINGS:
        if word.endswith(end) and len(word) - len(end) >= FORM_STEM:
            return word[: -len(end)]
    return word


def word_forms(word: str, vocabulary: frozenset[str]) -> list[str]:
    """The vocabulary's other forms of a word, sorted: the same stem once an inflection is cut ("adopts" ->
    "adopted"), or one word is the other plus at most FORM_EXTRA letters, the shorter having at least
    FORM_STEM ("paint" -> "painting"; "adoption" -> "adopt")."""
    w = word.lower()
    stem = _stem(w)
    out = []
    for v in vocabulary:
        if v == w:
            continue
        short, long_ = (w, v) if len(w) <= len(v) else (v, w)
        if (len(stem) >= FORM_STEM and _stem(v) == stem) or (
                len(short) >= FORM_STEM and long_.startswith(short) and len(long_) - len(short) <= FORM_EXTRA):
            out.append(v)
    return sorted(out)


def question_window(question: str) -> str:
    """The time span a question names in words, as the cue call's "YYYY-MM-DD YYYY-MM-DD" (a month and year:
    that month; "in 2023": that year), else "" (no year is guessed)."""
    found = _MONTH_YEAR.search(question or "")
    if found:
        month, year = _MONTHS.index(found[1].lower()) + 1, found[2]
        return f"{year}-{month:02d}-01 {year}-{month:02d}-{_LAST_DAY[month - 1]:02d}"
    found = _YEAR.search(question or "")
    return f"{found[1]}-01-01 {found[1]}-12-31" if found else ""


def lexical_question_cues(question: str, vocabulary: frozenset[str]) -> list[dict[str, object]]:
    """The question's cues without a model: its first QUESTION_CUES content words (the same rule as the
    lexical ingestion cues, `fallback_cues`), each with the memory's other forms of it as alternatives. The
    words of a named month or year are the time window's (`question_window`), not cues: no turn says them."""
    words = _YEAR.sub(" ", _MONTH_YEAR.sub(" ", question or ""))
    return [{"cue": w, "alternatives": word_forms(w, vocabulary)} for w in fallback_cues(words, QUESTION_CUES)]
