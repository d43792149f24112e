"""The cost benchmarks' shared pieces (benchmarks/devslice.py) and their `--scripted` fake models.

A scripted run is a plumbing check: its fake model must answer every ingestion call in the reply format
the prompt and schema ask for (`mg_ingest_format`, `mra_ingest_format`), or the run silently checks the
rule-based fallbacks instead; and `--set` must reach the run and its report.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import devslice, mgretrieval_cost, mragent_cost, runtime_numerics
from recollect.graphs.mgretrieval.vocabulary import DOC_TURN
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.memory.workspace import open_workspace
from tests.helpers import make_conversation
from tests.methods.mgretrieval.fakes import call_kind
from tests.methods.mragent.fakes import SESSIONS as MRA_SESSIONS

# Session 1's second turn has no usable long word ("really" is a stopword): the fake names its speaker.
MG_SESSIONS = [[("Ann", "I went hiking in the Alps with my sister Clara"), ("Bob", "That is really cool!")],
               [("Ann", "Clara loves hiking too"), ("Bob", "I bought a red kayak")]]


@pytest.mark.parametrize("fmt", ["compact", "json"])
def test_mgretrieval_fake_answers_the_format_asked_for(data_dir: str, fmt: str) -> None:
    model = mgretrieval_cost.scripted_model()
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mg_ingest_format=fmt, mg_match_min_sim=-1.0)
    report = ingest_conversation(make_conversation(MG_SESSIONS), "ns", ctx, methods=["mgretrieval"])[-1]
    assert report.fallbacks == []
    kinds = [call_kind(c["kwargs"]) for c in model.calls]
    assert kinds.count("turns") == 2 and kinds.count("matches") == 1  # one call each, no retry
    turns = open_workspace(data_dir).docs.items("ns", DOC_TURN)
    assert not any(t["fallback"] for t in turns.values())
    # K_i are the fake's (long usable words, then the speaker ingestion adds), not the fallback extractor's.
    assert turns["D1:1"]["keywords"] == ["hiking", "sister", "clara", "ann"]
    assert turns["D1:2"]["keywords"] == ["bob"]
    assert turns["D2:2"]["keywords"] == ["bought", "kayak", "bob"]


@pytest.mark.parametrize(("fmt", "calls_per_session"), [("compact", 2), ("compact_merged", 1), ("json", 2)])
def test_mragent_fake_answers_the_format_asked_for(data_dir: str, fmt: str, calls_per_session: int) -> None:
    from recollect.graphs.mragent.store import CueTagGraph

    model = mragent_cost.scripted_model()
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, mra_ingest_format=fmt, mra_ingest_cues="llm")
    report = ingest_conversation(make_conversation(MRA_SESSIONS), "ns", ctx, methods=["mragent"])[-1]
    assert report.fallbacks == []
    assert len(model.calls) == calls_per_session * len(MRA_SESSIONS)
    g = CueTagGraph.load(open_workspace(data_dir), "ns")
    ev = g.events["D1:1-1"]
    assert ev["tag"] == "chat" and ev["rewritten"] == "Ann: I adopted a grey cat named Pixel yesterday."
    assert ev["cues"] == ["adopted", "named", "Pixel", "yesterday", "Ann"]  # the fake's cues, not fallback tokens


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    devslice.add_run_args(p, namespace="ns", report="r")
    return p


def test_set_reaches_the_context_and_the_report_settings(data_dir: str) -> None:
    p = parser()
    args = p.parse_args(["--scripted", "--structured-method", "json_mode", "--set", "mg_ingest_format=json",
                         "--set", "mra_ingest_format=compact_merged", "--set", "mra_max_rounds=3"])
    args.overrides = devslice.setting_overrides(p, args.set)
    assert args.overrides == {"mg_ingest_format": "json", "mra_ingest_format": "compact_merged", "mra_max_rounds": 3}
    # The script's own flags apply first, then every --set.
    ctx = devslice.script_context(args, data_dir, mgretrieval_cost.scripted_model, mra_max_rounds=5, mg_depth=None)
    assert (ctx.mg_ingest_format, ctx.mra_ingest_format, ctx.mra_max_rounds) == ("json", "compact_merged", 3)
    assert ctx.structured_method == "json_mode" and ctx.mg_depth == AllMethodsContext().mg_depth
    args.conv = "conv-t"
    rep = devslice.report_identity("x.py", ctx, args, SimpleNamespace(embeddings=None),
                                   make_conversation(MG_SESSIONS), [], ("mg_depth", "mg_ingest_format"))
    assert rep["settings"] == {"mg_depth": AllMethodsContext().mg_depth, "mg_ingest_format": "json",
                               "mra_ingest_format": "compact_merged", "mra_max_rounds": 3}


@pytest.mark.parametrize("pair", ["mg_ingest_format=xml", "no_such_setting=1", "data_dir=/tmp/x", "mg_depth"])
def test_a_bad_set_is_an_argument_error(pair: str) -> None:
    p = parser()
    with pytest.raises(SystemExit):
        devslice.setting_overrides(p, p.parse_args(["--set", pair]).set)


def test_a_scripted_run_stops_when_ingestion_falls_back() -> None:
    build: Any = SimpleNamespace(fallbacks=["session 1: fallback keywords for D1:8"])
    with pytest.raises(SystemExit, match="fell back 1 time"):
        devslice.check_scripted_ingestion(argparse.Namespace(scripted=True), build)
    devslice.check_scripted_ingestion(argparse.Namespace(scripted=False), build)  # a real run reports them
    devslice.check_scripted_ingestion(argparse.Namespace(scripted=True), SimpleNamespace(fallbacks=[]))


def test_runtime_numerics_compares_replies_pairwise(tmp_path: Any) -> None:
    import json

    def run_file(name: str, texts: list[str]) -> str:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"runtime": name, "replies": [{"prompt_tokens": 10 + i, "text": t}
                                                                  for i, t in enumerate(texts)]}))
        return str(path)

    files = [run_file("a", ["- May 8: group", "same"]), run_file("b", ["- May 9: group", "same"]),
             run_file("c", ["- May 8: group", "other"])]
    report = tmp_path / "report"
    runtime_numerics.compare(argparse.Namespace(compare=files, report=str(report)))
    pairs = json.loads((report / "numerics.json").read_text())["pairs"]
    assert [(p["a"], p["b"], p["identical"]) for p in pairs] == [("a", "b", 1), ("a", "c", 1), ("b", "c", 0)]
    assert pairs[0]["chars_before_first_difference"] == [6, 4] and pairs[0]["reply_chars_a"] == [14, 4]
    assert "| a | b | 1 of 2 | 6 (14), 4 (4) |" in (report / "numerics.md").read_text()
    other = run_file("d", ["x"])
    with pytest.raises(SystemExit, match="saw different prompts"):  # a different number of prompts
        runtime_numerics.compare(argparse.Namespace(compare=[files[0], other], report=str(report)))
