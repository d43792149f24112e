"""What HyMem's query-time nodes share: the Level-1 search, the line forms the prompts show, the
memory pool line and the round counter (README.md in this folder, "Nodes")."""

from __future__ import annotations

from itertools import zip_longest

from recollect.graphs.hymem.memory import summary_index
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.state import HyMemState
from recollect.memory.retriever import MaskedRetriever
from recollect.memory.turn_ranking import ranked_turns
from recollect.memory.vectors import Unit
from recollect.prompts import load_prompt
from recollect.steps import workspace

EMPTY_STORE = "no HyMem summaries in this namespace (ingest it with the hymem builder)"


def top_summaries(ctx: HyMemContext, namespace: str, query: str, n: int) -> list[Unit]:
    """The top-n Level-1 summaries by cosine to `query` (with `hymem_rerank=hybrid`, by cosine and BM25 fused);
    ties keep corpus order.

    Over-fetching first makes the cut deterministic: the vector store breaks ties at its n-th
    result arbitrarily, and scores are rounded so float32 noise does not reorder equal texts.
    """
    if n <= 0:
        return []
    index = summary_index(workspace(ctx), namespace)
    if ctx.hymem_turn_ranking:
        return by_summary_and_turns(ctx, namespace, query, n)
    if ctx.hymem_rerank == "hybrid":
        # BM25 over the same units fused with the dense ranking (reciprocal ranks), as the chunk memory does
        units = MaskedRetriever(index, candidate_k=n + max(n, 10), rerank="hybrid").retrieve(query, [], n)
    else:
        units = index.query(query, n + max(n, 10))
    return sorted(units, key=lambda u: (-round(u.score, 5), u.metadata.get("order", 0)))[:n]


TURNS_PER_UNIT = 3  # turns fetched per unit asked for: enough that most of the n units can be reached by a turn


def by_summary_and_turns(ctx: HyMemContext, namespace: str, query: str, n: int) -> list[Unit]:
    """The top-n Level-1 units from two rankings taken in turn (hymem_turn_ranking): the summaries' cosine to
    `query` (first, as the spec ranks them), and their best linked turn's rank (cosine and BM25 fused); a unit
    already taken is skipped. So about half the units shown are those whose own turns match best, even when their summary
    does not. Ties keep corpus order."""
    ws = workspace(ctx)
    index = summary_index(ws, namespace)
    by_summary = sorted(index.query(query, index.count()), key=lambda u: (-round(u.score, 5), u.metadata.get("order", 0)))
    units_of_turn: dict[str, list[Unit]] = {}
    for u in sorted(by_summary, key=lambda u: u.metadata.get("order", 0)):
        for tid in u.turn_ids:
            units_of_turn.setdefault(tid, []).append(u)
    # the conversation's turns ranked by cosine and BM25 fused (exact, recollect.memory.turn_ranking): offline,
    # a unit's best turn ranked so found 51.3 % of the gold turns with 10 units, by cosine 44.7 % (spec: 38.0)
    hits = ranked_turns(ws, namespace, query, list(ws.turns(namespace)), TURNS_PER_UNIT * n, "hybrid")
    by_turns = [u for hit in hits for u in units_of_turn.get(hit, [])]
    taken: dict[str, Unit] = {}
    for pair in zip_longest(by_summary, by_turns):
        for u in pair:
            if len(taken) < n and u is not None:
                taken.setdefault(u.id, u)
    return list(taken.values())


def summary_line(u: Unit) -> str:
    return f"time: {u.metadata.get('date', 'unknown date')}, {u.text}"


def numbered(i: int, u: Unit) -> str:
    """A summary line with the index the light and selection replies cite it by."""
    return f"id: {i}, {summary_line(u)}"


def answer_style(ctx: HyMemContext, module: str) -> str:
    """The answer-form instruction for `light` or `deep` (hymem_answer_style)."""
    return load_prompt("hymem", f"style_{module}_{ctx.hymem_answer_style}")


def pool_line(draft: str | None) -> list[str]:
    """The memory pool: the previous answer, shown to the next answer call (none before a draft exists)."""
    return [f"previous answer: {draft}"] if draft else []


def turns_of(units: list[Unit]) -> list[str]:
    """The turn ids the units link to, first-seen order, no repeats."""
    return list(dict.fromkeys(t for u in units for t in u.turn_ids))


def round_of(state: HyMemState) -> int:
    return int(state.get("iteration") or 0)
