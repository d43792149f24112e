"""The evidence funnel: at which stage each method loses a question's gold evidence turns.

Four fractions of the question's gold evidence turns, one per stage, in every eval row:

- `evidence_in_memory`: reachable in the method's built memory at all (`memory_turn_ids` in the registry:
  RAG/MemR3 a chunk holds it, HyMem a summary links to its session, MGRetrieval a keyword maps to it,
  MRAgent an event was extracted from it; full context: every stored turn);
- `evidence_retrieved`: some retrieval step of the run brought it in as a candidate (the state's
  `retrieved_turn_ids`, united with what was shown: a shown turn was necessarily brought in);
- `evidence_shown`: a prompt the model saw held it, after budget packing (`shown_turn_ids`; the same
  number as the row's `evidence_recall`);
- `evidence_cited`: it is among the answer's supports (the same number as `support_recall`).

A fallback can retrieve a turn the memory structure does not reach (MGRetrieval's dense rounds read the
turn index, not the vocabulary), so `evidence_retrieved` may exceed `evidence_in_memory`; the other
stages only narrow. `evidence_stages` names, per gold turn, the last stage it reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recollect.eval.metrics import evidence_recall
from recollect.eval.reference import pct

FUNNEL_FIELDS = ("evidence_in_memory", "evidence_retrieved", "evidence_shown", "evidence_cited")
STAGE_LABELS = {"evidence_in_memory": "in memory", "evidence_retrieved": "retrieved", "evidence_shown": "shown",
                "evidence_cited": "cited"}
# The last stage a gold turn reached, from the furthest down
STAGES = ("cited", "shown", "retrieved", "in_memory", "not_in_memory")

# The built memory does not change while an eval runs: read each (method, data dir, namespace) once.
_REACH: dict[tuple[str, str, str, int], frozenset[str]] = {}


def memory_reach(method: str, ctx: Any, namespace: str) -> frozenset[str]:
    """Turn ids method `method`'s memory of `namespace` can reach (cached per run)."""
    from recollect.graphs.registry import memory_turn_ids
    from recollect.memory.workspace import open_workspace

    key = (method, str(ctx.data_dir), namespace, int(getattr(ctx, "memr3_chunk_tokens", 0) or 0))
    if key not in _REACH:
        _REACH[key] = frozenset(memory_turn_ids(method, open_workspace(ctx.data_dir), namespace, ctx))
    return _REACH[key]


def forget_reach_cache() -> None:
    """Drop cached reach sets (a memory was rebuilt in this process)."""
    _REACH.clear()


def evidence_stages(gold: Iterable[str], in_memory: Iterable[str], retrieved: Iterable[str],
                    shown: Iterable[str], cited: Iterable[str]) -> dict[str, str]:
    """Per gold turn, the furthest stage it reached (`STAGES`)."""
    sets = [("cited", set(cited)), ("shown", set(shown)), ("retrieved", set(retrieved)),
            ("in_memory", set(in_memory))]
    return {g: next((name for name, ids in sets if g in ids), "not_in_memory") for g in dict.fromkeys(gold)}


def funnel_fields(method: str, ctx: Any, namespace: str, state: dict[str, Any],
                  gold: Sequence[str]) -> dict[str, Any]:
    """The four funnel fractions and the per-turn stages for one answered question."""
    shown = [str(t) for t in state.get("shown_turn_ids") or []]
    retrieved = list(dict.fromkeys([*(str(t) for t in state.get("retrieved_turn_ids") or []), *shown]))
    cited = [str(t) for t in state.get("supports") or []]
    try:
        reach: Iterable[str] = memory_reach(method, ctx, namespace)
    except Exception:  # a namespace the method never built reaches nothing; the row's 0 says so
        reach = ()
    reach = set(reach)
    return {
        "evidence_in_memory": evidence_recall(reach, gold),
        "evidence_retrieved": evidence_recall(retrieved, gold),
        "evidence_shown": evidence_recall(shown, gold),
        "evidence_cited": evidence_recall(cited, gold),
        "evidence_stages": evidence_stages(gold, reach, retrieved, shown, cited) if gold else {},
    }


# --------------------------------------------------------------------------------------------- report


def funnel_markdown(summary: dict[str, Any], categories: Sequence[int]) -> list[str]:
    """A funnel table: one row per method and category (and the method overall)."""
    head = ["method", "category", "n", *(STAGE_LABELS[f] for f in FUNNEL_FIELDS)]
    rows: list[list[str]] = []
    for method, s in summary.items():
        cells = [("all 1-4", s["overall"])] + [(str(c), s["categories"].get(str(c))) for c in categories]
        for label, st in cells:
            if not st or not st.get("n") or all(st.get(f) is None for f in FUNNEL_FIELDS):
                continue
            rows.append([method, label, str(st["n"]), *(pct(st.get(f)) for f in FUNNEL_FIELDS)])
    if not rows:
        return []
    out = ["## Evidence funnel", "",
           "Share of the gold evidence turns that reached each stage (see `recollect.eval.funnel`): in the "
           "method's memory at all, brought in by a retrieval step, shown in a prompt after packing, cited "
           "by the answer.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def plot_funnel(plt: Any, path: Path, summary: dict[str, Any]) -> None:
    """Grouped bars: per method, the four stages overall (categories 1-4)."""
    methods = [m for m, s in summary.items() if any(s["overall"].get(f) is not None for f in FUNNEL_FIELDS)]
    fig, ax = plt.subplots(figsize=(max(6.4, 1.3 * len(methods) + 2), 4.2))
    width = 0.8 / len(FUNNEL_FIELDS)
    for i, field in enumerate(FUNNEL_FIELDS):
        xs = [j + (i - (len(FUNNEL_FIELDS) - 1) / 2) * width for j in range(len(methods))]
        ax.bar(xs, [100 * (summary[m]["overall"].get(field) or 0.0) for m in methods], width=width,
               label=STAGE_LABELS[field])
    ax.set_xticks(range(len(methods)), methods, fontsize=9)
    ax.set_ylabel("gold evidence turns reaching the stage (%)")
    ax.set_title("Evidence funnel (categories 1-4)")
    ax.set_ylim(0, 105)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------------------------- ask --gold-evidence

LOSS = {
    "not_in_memory": "lost in memory: the method's built memory does not reach it",
    "in_memory": "lost in retrieval: in memory, but no retrieval step brought it in",
    "retrieved": "lost in packing: retrieved, but no prompt showed it (budget or cap)",
    "shown": "lost in answering: shown to the model, but the answer does not cite it",
    "cited": "kept: cited by the answer",
}


def evidence_report(method: str, ctx: Any, namespace: str, state: dict[str, Any], gold: Sequence[str]) -> list[str]:
    """One line per gold turn: the stage at which the run dropped it (`ask --gold-evidence`)."""
    stages = funnel_fields(method, ctx, namespace, state, list(gold))["evidence_stages"]
    return [f"{turn}: {LOSS[stage]}" for turn, stage in stages.items()]
