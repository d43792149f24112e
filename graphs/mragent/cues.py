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
