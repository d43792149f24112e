"""How sure a comparison is: bootstrap intervals for each method's F1 and for its paired difference from a baseline.

Per-question LoCoMo-F1 values are resampled with replacement (`n_boot` times, a fixed seed, so the
report is reproducible). A paired difference resamples questions, not rows: both methods' values of
the same question stay together, which is what makes a difference of a few points decidable on a few
hundred questions. Only the questions both methods answered count (an errored row scores 0 and counts,
as in the summary). An interval whose both ends lie on one side of zero is the report's claim that one
method beats the other; anything else is "no difference shown".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recollect.eval.questions import CATEGORY_NAMES

JUDGED = (1, 2, 3, 4)
N_BOOT = 2000
SEED = 0


def bootstrap_mean(values: Sequence[float], *, n_boot: int = N_BOOT, seed: int = SEED,
                   level: float = 0.95) -> dict[str, float] | None:
    """The mean of `values` and its percentile bootstrap interval at `level`; None without values."""
    x = np.asarray([float(v) for v in values], dtype=float)
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return {"mean": float(x.mean()), "lo": float(lo), "hi": float(hi), "n": int(x.size)}


def _by_question(rows: Sequence[dict[str, Any]], method: str, categories: Sequence[int]) -> dict[str, float]:
    return {r["question_id"]: float(r["locomo_f1"] or 0.0) for r in rows
            if r["method"] == method and r["category"] in categories}


def paired_difference(rows: Sequence[dict[str, Any]], method: str, baseline: str, categories: Sequence[int],
                      **kw: Any) -> dict[str, float] | None:
    """`method` minus `baseline` on the questions both answered, with its bootstrap interval."""
    a, b = _by_question(rows, method, categories), _by_question(rows, baseline, categories)
    shared = sorted(set(a) & set(b))
    return bootstrap_mean([a[q] - b[q] for q in shared], **kw)


def verdict(diff: dict[str, float] | None) -> str:
    if diff is None:
        return "no shared questions"
    if diff["lo"] > 0:
        return "better"
    if diff["hi"] < 0:
        return "worse"
    return "no difference shown"


def intervals(rows: Sequence[dict[str, Any]], methods: Sequence[str], baseline: str = "rag") -> dict[str, Any]:
    """Per method, overall (categories 1-4) and per category: F1 with its interval, and the paired
    difference from `baseline` (absent for the baseline itself or when it has no rows)."""
    has_baseline = any(r["method"] == baseline for r in rows)
    out: dict[str, Any] = {"baseline": baseline if has_baseline else None, "n_boot": N_BOOT, "seed": SEED,
                           "level": 0.95, "methods": {}}
    scopes = {"overall": list(JUDGED), **{str(c): [c] for c in JUDGED}}
    for method in methods:
        per: dict[str, Any] = {}
        for scope, cats in scopes.items():
            f1 = bootstrap_mean(list(_by_question(rows, method, cats).values()))
            diff = (paired_difference(rows, method, baseline, cats)
                    if has_baseline and method != baseline else None)
            if f1 is not None:
                per[scope] = {"f1": f1, "vs_baseline": diff,
                              "verdict": verdict(diff) if diff is not None else None}
        walls = [float(r["wall_time_s"]) for r in rows if r["method"] == method and r["category"] in JUDGED]
        out["methods"][method] = {"scopes": per, "seconds_per_question": float(np.mean(walls)) if walls else None}
    return out


def _ci(x: dict[str, float] | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    sign = "+" if signed else ""
    return f"{100 * x['mean']:{sign}.1f} [{100 * x['lo']:{sign}.1f}, {100 * x['hi']:{sign}.1f}]"


def intervals_markdown(iv: dict[str, Any]) -> list[str]:
    """The report's section: one row per method, overall then per category."""
    base = iv["baseline"]
    head = ["method", "scope", "n", "LoCoMo-F1 [95% CI]"] + ([f"paired Δ vs {base} [95% CI]", "verdict"] if base else [])
    lines = [f"## Intervals ({iv['n_boot']} bootstrap resamples of questions, seed {iv['seed']})", "",
             "Each method's LoCoMo-F1 with its 95 % interval" + (
                 f", and its difference from {base} on the same questions (paired). 'better'/'worse' only "
                 "when the whole interval lies on one side of zero." if base else "."), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method, m in iv["methods"].items():
        for scope, s in m["scopes"].items():
            name = "overall (1-4)" if scope == "overall" else f"{scope} {CATEGORY_NAMES[int(scope)]}"
            cells = [method, name, str(s["f1"]["n"]), _ci(s["f1"])]
            if base:
                cells += [_ci(s["vs_baseline"], signed=True), s["verdict"] or "–"]
            lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def write_accuracy_vs_seconds(path: Any, iv: dict[str, Any]) -> None:
    """LoCoMo-F1 (with its interval) against mean seconds per question, one point per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for method, m in iv["methods"].items():
        overall = m["scopes"].get("overall")
        if overall is None or m["seconds_per_question"] is None:
            continue
        f1 = overall["f1"]
        y = 100 * f1["mean"]
        ax.errorbar(m["seconds_per_question"], y, yerr=[[y - 100 * f1["lo"]], [100 * f1["hi"] - y]], fmt="o",
                    capsize=4)
        ax.annotate(method, (m["seconds_per_question"], y), textcoords="offset points", xytext=(6, 4))
    ax.set_xlabel("seconds per question (mean)")
    ax.set_ylabel("LoCoMo-F1 (95 % bootstrap interval)")
    ax.set_title("Accuracy against time")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
