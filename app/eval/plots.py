"""Eval plots. matplotlib is the optional `plots` extra: it is imported inside
`write_plots` only, with the non-interactive Agg backend, so nothing else in the package needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKERS = {"usage": "o", "estimate": "^", "mixed": "s", None: "x"}
CATEGORIES = ("1", "2", "3", "4")
CATEGORY_LABELS = {"1": "1 multi-hop", "2": "2 temporal", "3": "3 open-domain", "4": "4 single-hop"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window, works on headless machines
    import matplotlib.pyplot as plt

    return plt


def accuracy_vs_tokens(plt: Any, path: Path, summary: dict[str, Any], judged: bool) -> None:
    key, label = ("J", "LLM-as-a-Judge J (%)") if judged else ("locomo_f1", "LoCoMo F1 (%)")
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    seen: set[Any] = set()
    at_level: dict[int, int] = {}  # labels of points at the same accuracy alternate above and below
    colour = {m: f"C{i}" for i, m in enumerate(summary)}  # the same colour per method as in per_category
    by_cost = sorted(summary.items(), key=lambda kv: float(kv[1]["overall"]["total_tokens"]))  # left to right
    for method, s in by_cost:
        o = s["overall"]
        y = o.get(key)
        if y is None:
            continue
        x = max(float(o["total_tokens"]), 1.0)  # log axis: a run with no LLM call still gets a point
        src = o.get("token_source")
        ax.scatter([x], [100 * y], marker=MARKERS.get(src, "x"), s=60, color=colour[method])
        seen.add(src)
        n = at_level[round(100 * y)] = at_level.get(round(100 * y), -1) + 1
        ax.annotate(method, (x, 100 * y), textcoords="offset points", xytext=(5, 5 if n % 2 == 0 else -13), fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("mean total tokens per question (prompt + completion, log scale)")
    ax.set_ylabel(label)
    ax.set_title("Accuracy vs. answering cost (categories 1-4)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_ylim(-5, 110)  # room for the labels of points at 0 and 100
    if seen:  # the legend explains the markers (token source), not the methods (they are labelled)
        handles = [plt.Line2D([], [], marker=MARKERS.get(src, "x"), color="grey", linestyle="",
                              label=f"tokens: {src or 'no LLM call'}") for src in seen]
        ax.legend(handles=handles, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def per_category(plt: Any, path: Path, summary: dict[str, Any], judged: bool) -> None:
    methods = list(summary)
    panels = [("J", "J (%)"), ("locomo_f1", "LoCoMo F1 (%)")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    width = 0.8 / max(len(methods), 1)
    for ax, (key, title) in zip(axes, panels, strict=True):
        if key == "J" and not judged:
            ax.text(0.5, 0.5, "no judge in this run", ha="center", va="center", transform=ax.transAxes)
        else:
            for i, method in enumerate(methods):
                cats = summary[method]["categories"]
                vals = [100 * (cats.get(c, {}).get(key) or 0.0) for c in CATEGORIES]
                xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(CATEGORIES))]
                ax.bar(xs, vals, width=width, label=method)
            ax.legend(fontsize=8)
        ax.set_xticks(range(len(CATEGORIES)), [CATEGORY_LABELS[c] for c in CATEGORIES], fontsize=8)
        ax.set_title(title)
        ax.set_ylim(0, 100)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_plots(out: Path, summary: dict[str, Any], judged: bool) -> list[Path]:
    """accuracy_vs_tokens.png, per_category.png and evidence_funnel.png in `out`; raises ImportError
    without matplotlib."""
    from recollect.eval.funnel import plot_funnel

    plt = _pyplot()
    paths = [out / "accuracy_vs_tokens.png", out / "per_category.png", out / "evidence_funnel.png"]
    accuracy_vs_tokens(plt, paths[0], summary, judged)
    per_category(plt, paths[1], summary, judged)
    plot_funnel(plt, paths[2], summary)
    return paths
