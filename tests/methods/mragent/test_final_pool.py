"""What MRAgent's final answer call picks from. The seed's share of the navigate prompt (`mra_seed_share`, issue 34):
the navigate call reads fewer seed lines, and the final answer call still picks from every turn the seed reached.
The neighbours (`mra_final_neighbours`, issue 35): it also ranks the turns next to those the loop looked at."""

from __future__ import annotations

import re

import pytest

from recollect.graphs.mragent import seed as seed_module
from recollect.graphs.mragent.seed import seed_budget
from recollect.graphs.registry import AllMethodsContext
from recollect.steps import workspace
from recollect.turn_answer import with_neighbours
from tests.methods.mragent.fakes import TURNS_ANSWER, QuestionModel, ingest
from tests.methods.mragent.test_memory import Q, nav, run, section

ON = {"mra_final_answer_tokens": 1280, "mra_answer_rewrite": False, "mra_final_answer_continues": False,
      "mra_tool_protocol": "json", "mra_max_rounds": 2}
SEED_LINE = re.compile(r"^(D\d+:\d+): ", re.M)
TURN_LINE = re.compile(r"^\[(D\d+:\d+)\] ", re.M)


@pytest.fixture
def base(data_dir: str) -> AllMethodsContext:
    ctx, _ = ingest(data_dir)
    return ctx


def test_the_seed_budget_is_the_share_of_the_navigate_prompts_room(base: AllMethodsContext) -> None:
    wide = base.with_overrides(max_prompt_tokens=8000)
    shares = [seed_budget(wide.with_overrides(mra_seed_share=s), Q) for s in (0.2, 0.4, 0.8)]
    assert shares[0] < shares[1] < shares[2]
    assert shares[2] == pytest.approx(2 * shares[1], abs=2) and shares[1] == pytest.approx(2 * shares[0], abs=2)
    assert seed_budget(base.with_overrides(mra_seed_share=0.6), Q) == seed_budget(base, Q)  # the default


def test_a_smaller_seed_share_shows_fewer_seed_lines_and_the_final_call_still_reads_the_rest(
        base: AllMethodsContext, monkeypatch: pytest.MonkeyPatch) -> None:
    def one_run(budget: int) -> tuple[list[str], list[str], dict]:
        # the tiny test dialogue fits any real share: the budget itself is set here, as a share would set it
        monkeypatch.setattr(seed_module, "seed_budget", lambda ctx, question: budget)
        qm = QuestionModel(navigate=[nav([])], turns={"answer": "Riverside shelter", "supports": ["D1:3"]})
        state, _ = run(base.with_overrides(chat_model=qm.model, **ON))
        navigate = [p for p in qm.model.prompts() if "Seed memories:" in p][0]
        final = [p for p in qm.model.prompts() if p.startswith(TURNS_ANSWER)][0]
        return SEED_LINE.findall(section(navigate, "Seed memories:")), TURN_LINE.findall(final), state

    seen_wide, read_wide, _ = one_run(10_000)
    seen_narrow, read_narrow, state = one_run(30)
    assert 0 < len(seen_narrow) < len(seen_wide)
    left_out = set(seen_wide) - set(seen_narrow)
    assert left_out <= set(state["retrieved_turn_ids"])
    assert left_out <= set(read_narrow)  # the final call reads the turns the navigate prompt no longer held
    assert set(read_narrow) == set(read_wide)


def test_neighbours_are_the_turns_next_to_each_in_its_own_session(base: AllMethodsContext) -> None:
    turns = workspace(base).turns("ns")
    assert with_neighbours(turns, ["D1:3", "D2:1", "D9:9"], 1) == ["D1:3", "D2:1", "D1:2", "D1:4", "D2:2"]
    assert with_neighbours(turns, ["D1:6"], 2) == ["D1:6", "D1:4", "D1:5"]  # D2:1 is the next session's
    assert with_neighbours(turns, ["D1:3", "D1:3"], 0) == ["D1:3"]


@pytest.mark.parametrize("width", [0, 1])
def test_the_final_answer_call_ranks_the_neighbours_of_the_turns_the_loop_looked_at(
        base: AllMethodsContext, monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    # one seed line (the budget set as a small share would set it): the loop looks at few turns
    monkeypatch.setattr(seed_module, "seed_budget", lambda ctx, question: 20)
    qm = QuestionModel(navigate=[nav([])], turns={"answer": "Riverside shelter", "supports": ["D1:3"]})
    state, _ = run(base.with_overrides(chat_model=qm.model, mra_final_neighbours=width, **ON))
    record = [r for r in state["trace"] if r["node"] == "answer"][-1]
    looked_at = set(state["retrieved_turn_ids"]) - set(record["final_neighbours"])
    read = TURN_LINE.findall([p for p in qm.model.prompts() if p.startswith(TURNS_ANSWER)][0])
    if width == 0:
        assert record["final_neighbours"] == [] and set(read) <= looked_at
        return
    assert record["final_neighbours"] and set(record["final_neighbours"]) <= set(read)
    assert set(record["final_neighbours"]) == set(with_neighbours(workspace(base).turns("ns"), sorted(looked_at), 1)) - looked_at
