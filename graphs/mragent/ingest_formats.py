"""Which ingestion calls MRAgent makes for its settings: per `mra_ingest_format` (and `mra_ingest_sentences`)
the prompts, the reply schemas (formats.py) and the completion caps of call A and call B."""

from __future__ import annotations

from dataclasses import dataclass

from recollect.graphs.mragent.formats import (
    CompactCueReply,
    CompactRewriteReply,
    CueReply,
    MergedRewriteReply,
    RewriteReply,
    TurnRewriteReply,
    turn_rewrite_reply,
)
from recollect.graphs.mragent.settings import MRAgentContext


@dataclass(frozen=True)
class IngestFormat:
    """One value of `mra_ingest_format`: the prompts (= cache call names), the reply schemas, and the
    completion caps `(base, per turn or sentence, ceiling)` of call A and call B."""

    rewrite: str
    rewrite_schema: type[RewriteReply]
    cues: str
    cue_schema: type[CueReply]
    numbered: bool  # the prompts show local numbers (turn index, sentence position) instead of ids
    merged: bool  # call A also writes the cues; call B only runs when it brought none
    rewrite_cap: tuple[int, int, int]
    cue_cap: tuple[int, int, int]
    turn_sentences: bool = False  # call A writes no sentence: each turn's text is its one event's sentence
    derived_labels: bool = False  # a turn row is its topic numbers only: tag and date are derived (validation)

    def rewrite_model(self, first: int, last: int) -> type[RewriteReply]:
        """Call A's reply model for the window of turns `first..last` (the turn rows are bounded by it)."""
        return turn_rewrite_reply(first, last, self.derived_labels) if self.turn_sentences else self.rewrite_schema


FORMATS = {
    "json": IngestFormat("rewrite", RewriteReply, "keywords", CueReply, False, False, (200, 140, 2400), (120, 70, 2400)),
    "compact": IngestFormat("rewrite_compact", CompactRewriteReply, "cues_compact", CompactCueReply, True, False,
                            (120, 90, 1600), (60, 45, 1600)),
    "compact_merged": IngestFormat("rewrite_merged", MergedRewriteReply, "cues_compact", CompactCueReply, True, True,
                                   (150, 150, 2400), (60, 45, 1600)),
}


# `mra_ingest_sentences="turn"` in the compact format: call A writes a row per turn with its tag and topics
# (about 10 tokens a row instead of a sentence's 30 to 50), the dated turns, and the topics and facts as before.
TURNS_FORMAT = IngestFormat("rewrite_turns", TurnRewriteReply, "cues_compact", CompactCueReply, True, False,
                            (150, 45, 1600), (60, 45, 1600), turn_sentences=True)
# `mra_turn_labels="derived"`: a row is the turn's topic numbers alone (about 4 tokens), no `times`
TOPICS_FORMAT = IngestFormat("rewrite_topics", TurnRewriteReply, "cues_compact", CompactCueReply, True, False,
                             (150, 25, 1600), (60, 45, 1600), turn_sentences=True, derived_labels=True)


def turn_sentences(ctx: MRAgentContext) -> bool:
    """Whether each event's sentence is its turn and call A writes none (`mra_ingest_sentences`); json and
    compact_merged always have call A write the sentences, so the setting does not apply to them."""
    return ctx.mra_ingest_sentences == "turn" and ctx.mra_ingest_format == "compact"


def ingest_format(ctx: MRAgentContext) -> IngestFormat:
    """The prompts, schemas and caps of this context's ingestion calls."""
    if turn_sentences(ctx):
        return TOPICS_FORMAT if ctx.mra_turn_labels == "derived" else TURNS_FORMAT
    return FORMATS[ctx.mra_ingest_format]


def lexical_cues(ctx: MRAgentContext) -> bool:
    """Whether sentences take their content words as cues with no call B (`mra_ingest_cues`); the
    merged format's cues come with call A, so the setting does not apply to it."""
    return ctx.mra_ingest_cues == "lexical" and not FORMATS[ctx.mra_ingest_format].merged


def completion_cap(cap: tuple[int, int, int], n: int) -> int:
    """A call's max_tokens for `n` turns (call A) or sentences (call B): base + per item, capped."""
    base, per, ceiling = cap
    return min(ceiling, base + per * n)
