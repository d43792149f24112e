"""Model-time estimates of `recollect eval --plan` (recollect.eval.estimate): a replayed row's seconds do not pass
for the graph's cost, the newest rows count, and carry-overs give a range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recollect.eval import estimate
from recollect.eval.ledger_run import GraphPlan, plan_text


def row(wall: float, computed: int = 0, completion: int = 0, method: str = "hymem", **kw: Any) -> dict[str, Any]:
    return {"method": method, "wall_time_s": wall, "prompt_tokens_computed": computed,
            "completion_tokens": completion, "error": None, **kw}


def test_a_replayed_rows_tokens_count_not_its_few_seconds() -> None:
    """Replies from the tape took 3 s but recorded 3,000 computed prompt tokens and 110 written ones: at the
    runtime's rates that is 60 s of model time, and the estimate says so."""
    rows = [row(3.0, 3000, 110)] * 4
    expected = 3000 / estimate.PREFILL_TOKENS_PER_S + 110 / estimate.DECODE_TOKENS_PER_S
    assert estimate.seconds_per_question("hymem", rows) == expected
    # measured seconds above the token seconds (retrieval, a slower machine) stand
    assert estimate.seconds_per_question("hymem", [row(200.0, 3000, 110)]) == 200.0


def test_the_newest_rows_estimate_the_graph_as_it_is_now() -> None:
    old = [row(20.0, 600, 30)] * 100  # an earlier, cheaper version of the graph
    new = [row(110.0, 4700, 200)] * estimate.RECENT_ROWS
    assert estimate.seconds_per_question("hymem", old + new) == 110.0
    assert estimate.seconds_per_question("hymem", [row(5.0, error="boom")]) == estimate.DEFAULT_SECONDS["hymem"]
    assert estimate.seconds_per_question("rag", old + new) == estimate.DEFAULT_SECONDS["rag"]  # other graphs' rows


def test_carry_overs_give_a_range_from_all_replayed_to_none() -> None:
    g = GraphPlan("hymem", "f" * 64, "hymem", "b" * 64, Path("/nowhere"), current=["q1"], carry=["q2", "q3"],
                  compute=["q4"], seconds_per_question=100.0)
    low = 100.0 + 2 * estimate.REPLAY_SECONDS
    assert (g.estimate_seconds(), g.estimate_seconds_at_most()) == (low, 300.0)
    text = plan_text([g], 4)
    assert f"{estimate.format_minutes(low)} to {estimate.format_minutes(300.0)}" in text
    assert "the high end if none does" in text
    done = GraphPlan("rag", "e" * 64, "turns", "c" * 64, Path("/nowhere"), current=["q1"])
    assert " to " not in plan_text([done], 1) and "range" not in plan_text([done], 1)
