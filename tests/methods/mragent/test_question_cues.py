"""MRAgent's question cues without a call (mra_question_cues = lexical) and the seed's ranked turns
(mra_seed_ranked_turns); both off under profile=paper."""

from __future__ import annotations

from typing import Any

from recollect.graphs.mragent.cues import lexical_question_cues, question_window, word_forms
from recollect.graphs.registry import AllMethodsContext
from tests.methods.mragent.fakes import QuestionModel, ingest
from tests.methods.mragent.test_graph import ANSWER, q, run


def records_of(trace: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    return [r for r in trace if r["node"] == node]


NOTHING = {"time_window": "", "cues": [{"cue": "zeppelin", "alternatives": []}]}  # a cue no turn has


def test_word_forms_come_from_the_memory() -> None:
    vocabulary = frozenset({"adopt", "adopted", "adoption", "painting", "paints", "camping", "campaign", "artist",
                            "danced", "pixel"})
    assert word_forms("adopts", vocabulary) == ["adopt", "adopted"]
    assert word_forms("paint", vocabulary) == ["painting", "paints"]
    assert word_forms("dancing", vocabulary) == ["danced"]
    assert word_forms("camp", vocabulary) == ["camping"]  # not "campaign": four more letters
    assert word_forms("art", vocabulary) == []  # too short to have forms
    assert word_forms("Pixel", vocabulary) == []  # the word itself is not another form


def test_question_window_only_from_a_named_month_or_year() -> None:
    assert question_window("What did Ann do in May 2023?") == "2023-05-01 2023-05-31"
    assert question_window("Where was Bob in February, 2024?") == "2024-02-01 2024-02-29"
    assert question_window("What happened in 2022?") == "2022-01-01 2022-12-31"
    assert question_window("What did Ann do in May?") == ""  # no year is guessed
    assert question_window("When did Ann adopt Pixel?") == ""


def test_lexical_cues_are_content_words() -> None:
    cues = lexical_question_cues("Where did Ann find the grey cat Pixel?", frozenset({"finding", "cats"}))
    assert [c["cue"] for c in cues] == ["Ann", "find", "grey", "cat", "Pixel"]
    assert cues[1]["alternatives"] == ["finding"] and cues[0]["alternatives"] == []


def test_lexical_cues_make_no_call(data_dir: str) -> None:
    ctx, _ = ingest(data_dir, mra_question_cues="lexical")
    qm = QuestionModel(navigate=[ANSWER])
    state, _ = run(q(ctx, qm), "Where did Ann adopt Pixel?")
    assert "cues" not in qm.kinds and qm.kinds[0] == "navigate"
    assert [c["cue"] for c in state["mra_cues"]] == ["Ann", "adopt", "Pixel"]
    adopt = state["mra_cues"][1]
    assert adopt["alternatives"] and all(a.startswith("adopt") for a in adopt["alternatives"])
    assert state["mra_time_window"] is None
    record = records_of(state["trace"], "extract_cues")[0]
    assert record["skipped_call"] == "mra_question_cues=lexical"
    assert any(line.startswith("D1:1:") for line in state["mra_seed"]["key_events"])  # the cues reach the turn


def test_lexical_window_of_a_named_month(data_dir: str) -> None:
    ctx, _ = ingest(data_dir, mra_question_cues="lexical")
    qm = QuestionModel(navigate=[ANSWER])
    state, _ = run(q(ctx, qm), "What did Ann adopt in May 2023?")
    assert state["mra_time_window"] == ["2023-05-01", "2023-05-31"]
    assert [c["cue"] for c in state["mra_cues"]] == ["Ann", "adopt"]


def test_ranked_turns_join_the_seed(data_dir: str) -> None:
    ctx, _ = ingest(data_dir)
    qm = QuestionModel(cues=NOTHING, navigate=[ANSWER])
    state, _ = run(q(ctx, qm, mra_seed_ranked_turns=2), "Where did Ann find the cat Pixel?")
    seed = state["mra_seed"]
    assert seed["key_events"] == [] and len(seed["ranked_turns"]) == 2
    ids = [line.split(": ", 1)[0] for line in seed["ranked_turns"]]
    assert "D1:1" in ids  # the turn that names the cat
    nav = next(p for p in qm.model.prompts() if p.startswith("You answer a question"))
    assert "Turns most similar to the question:" in nav and all(f"{i}: " in nav for i in ids)
    assert set(ids) <= set(state["retrieved_turn_ids"]) and set(ids) <= set(state["masks"])
    assert records_of(state["trace"], "seed")[0]["ranked_turns"] == ids


def test_ranked_turns_skip_what_the_paths_reached(data_dir: str) -> None:
    ctx, _ = ingest(data_dir)
    qm = QuestionModel(navigate=[ANSWER])  # the scripted cue "Pixel" reaches D1:1
    state, _ = run(q(ctx, qm, mra_seed_ranked_turns=3), "Where did Ann find the cat Pixel?")
    seed = state["mra_seed"]
    path_ids = {line.split(": ", 1)[0] for line in seed["key_events"]}
    ranked_ids = [line.split(": ", 1)[0] for line in seed["ranked_turns"]]
    assert "D1:1" in path_ids and len(ranked_ids) == 3 and not path_ids & set(ranked_ids)


def test_off_under_paper_and_zero_means_the_paths_only(data_dir: str) -> None:
    paper, default = AllMethodsContext(profile="paper"), AllMethodsContext()
    assert (paper.mra_question_cues, paper.mra_seed_ranked_turns) == ("llm", 0)
    assert (default.mra_question_cues, default.mra_seed_ranked_turns) == ("lexical", 8)
    ctx, _ = ingest(data_dir)
    qm = QuestionModel(cues=NOTHING, navigate=[ANSWER])
    state, _ = run(q(ctx, qm, mra_seed_ranked_turns=0))
    assert state["mra_seed"]["ranked_turns"] == [] and qm.kinds[0] == "cues"
