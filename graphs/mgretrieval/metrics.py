"""What the eval reports about an MGRetrieval run beside the shared columns (README.md in this folder,
"What this implementation changes, and why"): the auxiliary model's share of the usage and, per
question, what kind of rounds ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Nodes that call the auxiliary model: their usage is reported apart from the main LLM's (the paper's
# Table 3 counts only the main LLM).
AUX_LLM_NODES = frozenset({"select_keywords"})

ROUND_KIND_FIELDS = ("mg_rounds", "mg_speaker_only_rounds", "mg_cap_truncated_rounds", "mg_filled_turns",
                     "mg_ungrounded_sufficient_rounds")


def round_kinds(state: Mapping[str, Any]) -> dict[str, int]:
    """Per question, from the state's `mg_round_log`: rounds run, how many were speaker-only or cut by
    the per-round cap, the turns added by dense fill, and the rounds whose "sufficient" was rejected
    as ungrounded."""
    log = state.get("mg_round_log") or []
    rounds = [r for r in log if r.get("node") == "retrieve_round"]
    assessed = [r for r in log if r.get("node") == "assess"]
    counts = (len(rounds), sum(bool(r.get("speaker_only")) for r in rounds),
              sum(bool(r.get("cap_truncated")) for r in rounds),
              sum(int(r.get("n_filled") or 0) for r in rounds),
              sum(r.get("grounded") is False for r in assessed))
    return dict(zip(ROUND_KIND_FIELDS, counts, strict=True))
