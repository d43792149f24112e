"""MGRetrieval's retrieval-round improvements (graphs/mgretrieval/DESIGN.md "Retrieval rounds"), scripted models.

Same fixture as test_graph.py (8 turns by Ann, Φ known exactly):

    apple  → D1:1 D1:2 D1:3 D1:4 D1:5      banana → D1:1 D1:2 D1:3 D1:6
    cherry → D1:1 D1:4 D1:7 D1:8           fig, grape → D1:8

Q = [apple, banana] gives the pyramid {a,b} = {1,2,3}, {a} = {1..5}, {b} = {1,2,3,6}; D1:7 and D1:8
("golf note about cherry blossoms", "hotel note about figs and grapes") are in no group of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from recollect.graphs.mgretrieval.graph import graph
from recollect.graphs.mgretrieval.metrics import round_kinds
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel
from recollect.memory.turn_ranking import top_by_similarity
from recollect.memory.workspace import open_workspace
from recollect.steps import NO_INFO
from tests.helpers import run_graph
from tests.methods.mgretrieval.fakes import FakeAux, ingest_scripted, schema_props
from tests.methods.mgretrieval.test_graph import ID, KW, SPEC, TEXTS, aux_model, recs

Q = "What did Ann say about fruit?"


@pytest.fixture
def data(data_dir: str) -> str:
    ingest_scripted(data_dir, [[("Ann", t) for t in TEXTS]], FakeAux(KW), mg_match_min_sim=0.99)
    return data_dir


class Main:
    """The main model: assess replies per round (the last one repeats), then `final` for the rewrite."""

    def __init__(self, rounds: list[dict[str, Any]], final: str = "Final") -> None:
        self.rounds = rounds
        self.final = final
        self.assess_prompts: list[str] = []
        self.model = ScriptedChatModel(default=self.reply)

    def reply(self, messages: list[Any], kwargs: dict[str, Any]) -> Any:
        if "sufficient" in schema_props(kwargs):
            self.assess_prompts.append("\n".join(str(m.content) for m in messages))
            return self.rounds[min(len(self.assess_prompts), len(self.rounds)) - 1]
        return {"answer": self.final}


def ask(data_dir: str, main: Main, keywords: list[str], **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rounds at main's defaults, answered by the rewrite: the final answer call after them is
    test_final_answer.py's."""
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=main.model, aux_chat_model=aux_model(keywords),
                            **{"mg_final_answer_tokens": 0, **kw})
    return run_graph(graph, ctx, "ns", Q)


def rounds_run(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in recs(out["trace"], "retrieve_round") if not r.get("exhausted")]


def new_part(prompt: str) -> list[str]:
    return ID.findall(prompt.split("New memories:")[1])


def kept_part(prompt: str) -> list[str]:
    return ID.findall(prompt.split("Key memories kept from earlier rounds:")[1].split("New memories:")[0])


def test_defaults_and_spec_values_are_one_value_apart() -> None:
    ctx = AllMethodsContext()
    assert (ctx.mg_assess_grounding, ctx.mg_dense_fill, ctx.mg_exhausted_fallback, ctx.mg_keep_critical_when_none,
            ctx.mg_rewrite_keep_draft, ctx.mg_turn_ranking) == (True, 30, "dense", True, True, "hybrid")
    assert (ctx.mg_max_new_per_round, AllMethodsContext(profile="paper").mg_max_new_per_round) == (30, 20)
    assert all(getattr(ctx, k) != v for k, v in SPEC.items())


# --- grounded sufficiency --------------------------------------------------------------------------


def test_ungrounded_sufficient_in_round_one_goes_on_to_a_second_round(data: str) -> None:
    # "grapes" is only in D1:8, which no keyword group of [apple, banana] holds.
    main = Main([{"answer": "grapes", "sufficient": True, "critical_ids": []}])
    out, state = ask(data, main, ["apple", "banana"], mg_dense_fill=0, mg_exhausted_fallback="stop")
    a1 = recs(out["trace"], "assess")[0]
    assert (a1["claimed_sufficient"], a1["grounded"], a1["sufficient"], a1["decision"]) == (True, False, False, "continue")
    assert a1["why_not_sufficient"] == "the answer is not found in the memories shown"
    assert len(main.assess_prompts) == 3 == state["iteration"]  # {a,b}, {a}, {b}: never grounded, pyramid exhausted
    assert round_kinds(out)["mg_ungrounded_sufficient_rounds"] == 3


def test_grounded_sufficient_stops_after_round_one(data: str) -> None:
    main = Main([{"answer": "apple pie", "sufficient": True, "critical_ids": ["D1:2"]}])  # D1:2 "about apple pie"
    out, state = ask(data, main, ["apple", "banana"], mg_dense_fill=0)
    assert len(main.assess_prompts) == 1
    a1 = recs(out["trace"], "assess")[0]
    assert (a1["grounded"], a1["sufficient"], a1["decision"]) == (True, True, "sufficient")
    assert out["answer"] == "Final" and out["supports"] == ["D1:2"]
    assert round_kinds(out)["mg_ungrounded_sufficient_rounds"] == 0


def test_an_answer_found_in_a_kept_memory_is_grounded(data: str) -> None:
    main = Main([{"answer": NO_INFO, "sufficient": False, "critical_ids": ["D1:2"]},
                 {"answer": "apple pie", "sufficient": True, "critical_ids": ["D1:2"]}])
    out, _ = ask(data, main, ["apple", "banana"], mg_dense_fill=0)
    assert new_part(main.assess_prompts[1]) == ["D1:4", "D1:5"] and kept_part(main.assess_prompts[1]) == ["D1:2"]
    assert len(main.assess_prompts) == 2 and recs(out["trace"], "assess")[1]["grounded"] is True


def test_no_information_is_never_sufficient(data: str) -> None:
    main = Main([{"answer": NO_INFO, "sufficient": True, "critical_ids": []}])
    out, _ = ask(data, main, ["apple", "banana"], mg_dense_fill=0, mg_exhausted_fallback="stop", mg_max_rounds=2)
    a1 = recs(out["trace"], "assess")[0]
    assert a1["sufficient"] is False and a1["why_not_sufficient"] == "a 'no information' answer is never sufficient"
    assert len(main.assess_prompts) == 2


def test_grounding_off_accepts_the_models_sufficient_as_the_spec_does(data: str) -> None:
    main = Main([{"answer": "grapes", "sufficient": True, "critical_ids": []}])
    out, _ = ask(data, main, ["apple", "banana"], mg_dense_fill=0, mg_assess_grounding=False)
    assert len(main.assess_prompts) == 1
    a1 = recs(out["trace"], "assess")[0]
    assert a1["sufficient"] is True and a1["grounded"] is None and a1["decision"] == "sufficient"


# --- dense fill ------------------------------------------------------------------------------------


def nearest(data_dir: str, exclude: set[str], n: int) -> list[str]:
    """The question's n nearest turns outside `exclude`: cosine to the turn collection's stored vectors,
    ties to the earlier turn (the fixture's hashing embedder gives D1:2, D1:3, D1:6, D1:7 one score)."""
    ws = open_workspace(data_dir)
    got = ws.index("turns", "ns").collection.get(include=["embeddings"])
    q = np.asarray(ws.embeddings.embed_query(Q), dtype=float)
    sims = {i: float(np.dot(q, v) / (np.linalg.norm(q) * np.linalg.norm(v))) for i, v in zip(got["ids"], got["embeddings"], strict=True)}
    order = list(ws.turns("ns"))
    return sorted((t for t in order if t not in exclude), key=lambda t: (-round(sims[t], 6), order.index(t)))[:n]


def test_a_two_turn_group_is_topped_up_with_dense_neighbours_that_are_then_masked(data: str) -> None:
    main = Main([{"answer": "jam", "sufficient": False, "critical_ids": []}])
    out, state = ask(data, main, ["apple", "cherry"], mg_dense_fill=5, mg_max_rounds=2)  # {a,c} = {1,4}
    r1, r2 = rounds_run(out)
    filled = nearest(data, {"D1:1", "D1:4"}, 3)
    assert (r1["keywords"], r1["size"], r1["n_new"], r1["n_filled"]) == (["apple", "cherry"], 2, 5, 3)
    assert r1["filled_ids"] == sorted(filled) and set(r1["new_ids"]) == {"D1:1", "D1:4", *filled}
    assert set(new_part(main.assess_prompts[0])) == set(r1["new_ids"])  # shown as new memories
    assert not set(r2["new_ids"]) & set(r1["new_ids"])  # masked: never shown as new again
    assert set(r1["new_ids"]) <= set(state["masks"])
    assert round_kinds(out)["mg_filled_turns"] == r1["n_filled"] + r2["n_filled"]


def test_fill_zero_shows_only_the_group(data: str) -> None:
    main = Main([{"answer": "jam", "sufficient": False, "critical_ids": []}])
    out, _ = ask(data, main, ["apple", "cherry"], mg_dense_fill=0, mg_max_rounds=1)
    r1 = rounds_run(out)[0]
    assert (r1["new_ids"], r1["n_filled"], r1["filled_ids"]) == (["D1:1", "D1:4"], 0, [])


def test_fill_respects_the_per_round_cap_and_leaves_larger_groups_alone(data: str) -> None:
    main = Main([{"answer": "jam", "sufficient": False, "critical_ids": []}])
    out, _ = ask(data, main, ["apple", "cherry"], mg_dense_fill=10, mg_max_new_per_round=3, mg_max_rounds=1)
    r1 = rounds_run(out)[0]
    assert (r1["n_new"], r1["n_filled"]) == (3, 1) and r1["filled_ids"] == nearest(data, {"D1:1", "D1:4"}, 1)

    out, _ = ask(data, Main([{"answer": "x", "sufficient": False}]), ["apple"], mg_dense_fill=4, mg_max_rounds=1)
    r1 = rounds_run(out)[0]
    assert (r1["n_new"], r1["n_filled"]) == (5, 0)  # {apple} has 5 new memories, more than the fill


# --- dense rounds after the pyramid -----------------------------------------------------------------


def test_rounds_left_after_the_pyramid_are_dense_rounds(data: str) -> None:
    main = Main([{"answer": "blossoms", "sufficient": False, "critical_ids": []}])
    out, _ = ask(data, main, ["cherry", "fig"], mg_dense_fill=0)  # {c,f} = {8}; {c} → 1, 4, 7; {f} fully shown
    rounds = rounds_run(out)
    assert [r["level"] for r in rounds] == [2, 1, 0]
    assert set(rounds[2]["new_ids"]) == {"D1:2", "D1:3", "D1:5", "D1:6"}  # every turn not shown yet
    assert rounds[2]["note"].startswith("pyramid exhausted: dense round")
    assert recs(out["trace"], "retrieve_round")[-1]["exhausted"]  # nothing left unmasked: stop before round 4
    assert len(main.assess_prompts) == 3

    main = Main([{"answer": "blossoms", "sufficient": False, "critical_ids": []}])
    out, _ = ask(data, main, ["cherry", "fig"], mg_dense_fill=0, mg_exhausted_fallback="stop")
    assert [r["level"] for r in rounds_run(out)] == [2, 1] and len(main.assess_prompts) == 2


def test_ungrounded_answer_is_accepted_once_a_dense_round_shows_its_memory(data: str) -> None:
    main = Main([{"answer": "grapes", "sufficient": True, "critical_ids": []}])
    out, _ = ask(data, main, ["apple", "banana"], mg_dense_fill=0)
    assess = recs(out["trace"], "assess")
    assert [a["grounded"] for a in assess] == [False, False, False, True]
    assert rounds_run(out)[-1]["level"] == 0 and "D1:8" in rounds_run(out)[-1]["new_ids"]
    assert assess[-1]["decision"] == "sufficient"


# --- critical memories when the reply names none ------------------------------------------------------


def test_a_reply_naming_no_memory_keeps_h_and_the_new_memories(data: str) -> None:
    main = Main([{"answer": NO_INFO, "sufficient": False, "critical_ids": ["D9:9"]}])
    out, _ = ask(data, main, ["apple", "banana"], mg_dense_fill=0, mg_max_rounds=2, mg_max_critical=2)
    a1 = recs(out["trace"], "assess")[0]
    assert len(a1["kept_ids"]) == 2 and set(a1["kept_ids"]) <= {"D1:1", "D1:2", "D1:3"}
    assert a1["critical_from"].startswith("H(r-1) ∪ R̃(r)")
    assert kept_part(main.assess_prompts[1]) == a1["kept_ids"]
    a2 = recs(out["trace"], "assess")[1]  # round 2 names none either: H(1) ∪ R̃(2), cut to 2 by similarity
    assert len(a2["kept_ids"]) == 2 and set(a2["kept_ids"]) <= {*a1["kept_ids"], "D1:4", "D1:5"}


def test_spec_replaces_h_with_nothing_when_the_reply_names_none(data: str) -> None:
    main = Main([{"answer": NO_INFO, "sufficient": False, "critical_ids": []}])
    out, _ = ask(data, main, ["apple", "banana"], mg_dense_fill=0, mg_max_rounds=2, mg_keep_critical_when_none=False)
    assert recs(out["trace"], "assess")[0]["kept_ids"] == []
    assert kept_part(main.assess_prompts[1]) == [] and "(none)" in main.assess_prompts[1]


# --- the rewrite keeps an answer ----------------------------------------------------------------------


def test_rewrite_saying_no_information_keeps_the_draft(data: str) -> None:
    main = Main([{"answer": "apple pie", "sufficient": True, "critical_ids": ["D1:2"]}], final=NO_INFO)
    out, _ = ask(data, main, ["apple", "banana"])
    assert out["answer"] == "apple pie"
    rw = recs(out["trace"], "rewrite")[0]
    assert rw["rewrite_reply"] == NO_INFO and "draft answer unchanged" in rw["fallback_rule"]

    main = Main([{"answer": "apple pie", "sufficient": True, "critical_ids": ["D1:2"]}], final=NO_INFO)
    out, _ = ask(data, main, ["apple", "banana"], mg_rewrite_keep_draft=False)
    assert out["answer"] == NO_INFO


def test_rewrite_of_a_no_information_draft_is_left_alone(data: str) -> None:
    main = Main([{"answer": NO_INFO, "sufficient": False, "critical_ids": ["D1:2"]}], final=NO_INFO)
    out, _ = ask(data, main, ["apple", "banana"], mg_max_rounds=1)
    assert out["answer"] == NO_INFO and "fallback_rule" not in recs(out["trace"], "rewrite")[0]


def test_an_answer_made_of_the_question_words_is_an_echo() -> None:
    from recollect.steps import echoes_question as _echoes

    question = "What is the name of the dog Maya adopted?"
    assert _echoes("Maya", question) and _echoes("the dog", question)
    assert not _echoes("Biscuit", question) and not _echoes("", question)


# --- turn ranking (mg_turn_ranking) -------------------------------------------------------------------

# "golf" is D1:7's word alone; "an" (D1:5's) is a BM25 stopword but pulls the hashing embedder's cosine
# towards D1:5: no other turn gets a BM25 score, and cosine ranks another turn first
GOLF_Q = "golf and an and an"


def test_hybrid_ranking_puts_the_one_turn_sharing_the_questions_rare_word_first(data: str) -> None:
    """Fused with BM25, the only turn with a BM25 score gets 1/(k+1) + its cosine term, more than any other
    turn's cosine term alone, so it ranks first wherever its cosine places it."""
    ws = open_workspace(data)
    ids = list(ws.turns("ns"))
    by_cosine = top_by_similarity(ws, "ns", GOLF_Q, ids, len(ids) - 1, "cosine")
    assert by_cosine[0] != "D1:7"  # the hashing embedder ranks another turn first: the setting matters here
    by_fusion = top_by_similarity(ws, "ns", GOLF_Q, ids, len(ids) - 1, "hybrid")
    assert by_fusion[0] == "D1:7" and len(set(by_fusion)) == len(ids) - 1
    # turns without the word keep their cosine order behind it
    assert [t for t in by_fusion if t != "D1:7"] == [t for t in by_cosine if t != "D1:7"][:len(ids) - 2]


def test_the_per_round_cap_keeps_what_the_ranking_ranks_first(data: str) -> None:
    """Φ(cherry) = D1:1, D1:4, D1:7, D1:8 capped to one turn: the fused ranking keeps the golf turn."""
    kept: dict[str, list[str]] = {}
    for ranking in ("cosine", "hybrid"):
        main = Main([{"answer": "x", "sufficient": False, "critical_ids": []}])
        ctx = AllMethodsContext(data_dir=data, chat_model=main.model, aux_chat_model=aux_model(["cherry"]),
                                mg_max_new_per_round=1, mg_max_rounds=1, mg_turn_ranking=ranking)
        out, _ = run_graph(graph, ctx, "ns", GOLF_Q)
        r1 = rounds_run(out)[0]
        assert (r1["size"], r1["n_new"], r1["n_capped"]) == (4, 1, 3)
        kept[ranking] = r1["new_ids"]
    assert kept["hybrid"] == ["D1:7"] and kept["cosine"] != ["D1:7"]
