"""The keyword pyramid (paper eq. 10; README.md in this folder, "The retrieval pyramid") and the
`build_pyramid` node that builds it for the selected keywords Q. Deterministic: no LLM call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from langgraph.runtime import Runtime

from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.state import MGRetrievalState
from recollect.graphs.mgretrieval.turns import turn_order
from recollect.graphs.mgretrieval.vocabulary import KeywordVocabulary, normalise_keyword
from recollect.memory.workspace import Workspace
from recollect.steps import workspace
from recollect.trace import emit


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
        return {"level": self.level, "keywords": list(self.keywords), "size": self.size,
                "ids": list(self.ids)}


class KeywordPyramid:
    """All non-empty keyword combinations of Q, top level first, by |s(P)| descending in a level."""

    @staticmethod
    def build(keywords: Sequence[str], phi: dict[str, list[str]],
              turn_order: dict[str, int] | None = None) -> list[KeywordGroup]:
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


def speaker_keywords(ws: Workspace, namespace: str) -> set[str]:
    """The speakers' names as vocabulary keywords (ingestion makes each turn's speaker a keyword)."""
    return {normalise_keyword(t.speaker) for t in ws.turns(namespace).values()} - {""}


def build_pyramid(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    keywords = list(state.get("mg_keywords") or [])
    vocab = KeywordVocabulary.load(ws, ns)
    order = turn_order(ws, ns)
    phi = {k: [t for t in vocab.memories(k) if t in order] for k in keywords}  # never point at unknown turns
    groups = [g.as_dict() for g in KeywordPyramid.build(keywords, phi, order)]
    speakers = speaker_keywords(ws, ns)
    for g in groups:
        g["speaker_only"] = bool(g["keywords"]) and all(k in speakers for k in g["keywords"])
    if ctx.mg_speaker_only_groups == "last":  # stable: the other groups keep the paper's order
        groups = [g for g in groups if not g["speaker_only"]] + [g for g in groups if g["speaker_only"]]
    return {
        "mg_pyramid": groups,
        "mg_cursor": 0,
        "mg_exhausted": False,
        "trace": emit(
            "build_pyramid", keywords=keywords, n_groups=len(groups),
            pyramid=[f"L{g['level']} {' + '.join(g['keywords'])} ({g['size']})" for g in groups],
            phi_sizes={k: len(v) for k, v in phi.items()},
            speaker_only_groups=sum(g["speaker_only"] for g in groups),
            speaker_order=ctx.mg_speaker_only_groups,
        ),
    }
