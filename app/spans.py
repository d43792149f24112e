"""When an answer is already a span: the test that lets a graph skip its span rewrite (MRAgent's
`mra_rewrite_skip_words`, HyMem's `hymem_rewrite_skip_words`)."""

from __future__ import annotations


def is_short_span(text: str, max_words: int) -> bool:
    """An answer the span rewrite can only restate: at most `max_words` words and no digit (0: none is).
    Dates and numbers are always rewritten (relative times become absolute dates there)."""
    return 0 < len(text.split()) <= max_words and not any(ch.isdigit() for ch in text)
