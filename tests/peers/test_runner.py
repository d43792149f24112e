"""The peers runner end to end with a fake peer and a scripted answer model (no mem0 / LangMem needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.peers.run import main, run_peers
from recollect.eval.metrics import score_prediction
from recollect.eval.plan import EvalError, plan_run
from recollect.eval.rows import JSONL_NAME, ROW_FIELDS, load_rows
from recollect.eval.runner import run_eval
from recollect.graphs.registry import AllMethodsContext
from recollect.prompts import render_prompt
from tests.peers.fakes import Factory, answer_model

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eval_mini_locomo.json"


def run(out: Path, data_dir: str, factory: Factory | None = None, model=None, **kw) -> Path:
    return run_peers(FIXTURE, kw.pop("peers", ["mem0", "langmem"]), out_dir=out, answer_model=model or answer_model(),
                     make_peer=factory or Factory(), ctx=AllMethodsContext(data_dir=data_dir), show_progress=False,
                     plots=False, **kw)


def rows_of(out: Path) -> list[dict]:
    return load_rows(out / JSONL_NAME, retry_errors=False)


def test_rows_have_the_eval_format_and_are_scored_by_the_eval(tmp_path: Path, data_dir: str) -> None:
    out = run(tmp_path / "run", data_dir)
    rows = rows_of(out)
    assert {r["method"] for r in rows} == {"mem0", "langmem"}
    assert len(rows) == 2 * 5  # categories 1-4 of the fixture, both peers
    for r in rows:
        assert list(r) == list(ROW_FIELDS)
        assert r["backbone_model"] == "ScriptedChatModel" and r["judge_model"] is None and r["error"] is None
        for key, value in score_prediction(r["prediction"], r["gold"], r["category"]).items():
            assert r[key] == value
        # memories, not turns: no turn-level evidence, sessions from the provenance
        assert r["evidence_recall"] is None and r["support_recall"] is None and r["retrieved_turn_ids"] == []
        assert r["evidence_in_memory"] is None and r["evidence_stages"] is None
        assert r["session_recall"] == 1.0  # the fake keeps every turn, and k=5 shows both sessions
        assert r["n_llm_calls"] == 1 and r["prompt_tokens"] > 0 and r["token_source"] == "usage"
    by_q = {r["question_id"]: r for r in rows if r["method"] == "mem0"}
    assert by_q["conv-e1#0"]["prediction"] == "Pixel" and by_q["conv-e1#0"]["supports"] == ["locomo-conv-e1/D1:1"]
    # the date step every graph has: "yesterday", said on 10 April 2023
    assert by_q["conv-e1#1"]["prediction"] == "9 April 2023" and by_q["conv-e1#1"]["locomo_f1"] == 1.0


def test_the_answer_prompt_is_the_rag_prompt(tmp_path: Path, data_dir: str) -> None:
    model = answer_model()
    run(tmp_path / "run", data_dir, model=model, peers=["mem0"], limit=1)
    prompt = model.calls[0]["messages"][-1].content
    lines = [line for line in prompt.split("\n") if line.startswith("[M")]
    assert lines[0] == "[M1] 9:00 am on 3 March, 2023 | Ann: I adopted a grey cat called Pixel last week."
    assert prompt == render_prompt("baselines", "answer", memories="\n".join(lines),
                                   question="What is the name of Ann's cat?")
    assert len(lines) == 5  # top k = 5, like rag_top_k


def test_top_k_and_ingestion_log(tmp_path: Path, data_dir: str) -> None:
    factory, model = Factory(llm_calls_per_session=2), answer_model()
    out = run(tmp_path / "run", data_dir, factory, model=model, peers=["langmem"], top_k=2)
    assert all(p.count("\n[M") == 2 for p in model.prompts())
    log = [json.loads(line) for line in (out / "peers" / "langmem" / "locomo-conv-e1.sessions.jsonl").read_text().splitlines()]
    assert [r["session"] for r in log] == [1, 2]
    assert log[0]["llm_calls"] == 2 and log[0]["prompt_tokens"] == 200 and log[0]["events"]["ADD"] == 3
    assert log[1]["stored_after"] == 6 and log[0]["seconds"] >= 0 and log[0]["replies_cut_at_cap"] == 0
    prov = json.loads((out / "peers" / "langmem" / "locomo-conv-e1.provenance.json").read_text())
    assert prov["locomo-conv-e1/D2:1"] == {"sessions": [2], "date_time": "6:30 pm on 10 April, 2023"}
    summary = (out / "summary.md").read_text()
    assert "## Peers (benchmarks/peers)" in summary and "| langmem:locomo-conv-e1 | langmem | 2 | 4 |" in summary


def test_resume_skips_ingested_sessions_and_written_rows(tmp_path: Path, data_dir: str) -> None:
    out = tmp_path / "run"
    first = Factory()
    run(out, data_dir, first)
    again = Factory()
    model = answer_model()
    run(out, data_dir, again, model=model)
    assert again.built == [] and model.calls == []  # nothing pending: no peer built, no call made
    assert len(rows_of(out)) == 10


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path, data_dir: str) -> None:
    out = tmp_path / "run"
    calls = {"n": 0}
    base = answer_model()

    def reply(messages, kwargs):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return base.default(messages, kwargs)

    from recollect.llm.scripted import ScriptedChatModel

    with pytest.raises(KeyboardInterrupt):
        run(out, data_dir, peers=["mem0"], model=ScriptedChatModel(default=reply))
    assert len(rows_of(out)) == 2
    factory = Factory()
    run(out, data_dir, factory, peers=["mem0"])
    assert factory.built[0].ingested == []  # both sessions were logged before the interruption
    assert sorted(r["question_id"] for r in rows_of(out)) == [f"conv-e1#{i}" for i in range(5)]


def test_failed_rows_are_recorded_then_retried(tmp_path: Path, data_dir: str) -> None:
    out = tmp_path / "run"
    run(out, data_dir, Factory(fail_on="violin"), peers=["mem0"])
    failed = [r for r in rows_of(out) if r["error"]]
    assert len(failed) == 1 and failed[0]["prediction"] == "" and failed[0]["locomo_f1"] == 0.0
    assert "RuntimeError: search failed" in failed[0]["error"]
    factory = Factory()
    run(out, data_dir, factory, peers=["mem0"])
    assert factory.built[0].searches == ["Who teaches Bob the violin?"]  # only the failed question again
    doc = json.loads((out / "summary.json").read_text())
    assert doc["methods"]["mem0"]["overall"]["n_errors"] == 0


def test_same_selection_as_the_eval(tmp_path: Path, data_dir: str) -> None:
    out = run(tmp_path / "run", data_dir, peers=["mem0"], sample=3, seed=1, max_sessions=1)
    plan = plan_run(FIXTURE, None, None, (1, 2, 3, 4), None, 1, False, True, 1, 3, 1)
    assert [r["question_id"] for r in rows_of(out)] == [q.id for q in plan.questions]
    assert {r["session_recall"] for r in rows_of(out)} == {1.0}
    assert (out / "peers" / "mem0" / "locomo-conv-e1-s1.sessions.jsonl").is_file()  # the eval's namespace


def test_peers_join_an_eval_run_in_one_summary(tmp_path: Path, data_dir: str) -> None:
    out = tmp_path / "run"
    model = answer_model()
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, memr3_chunk_tokens=20, memr3_rerank="none")
    run_eval(FIXTURE, ["rag"], out_dir=out, ctx=ctx, judge="none", show_progress=False, plots=False)
    eval_run_id = json.loads((out / "run_config.json").read_text())["run_id"]
    run(out, data_dir, model=model)
    rows = rows_of(out)
    assert {r["run_id"] for r in rows} == {eval_run_id}
    doc = json.loads((out / "summary.json").read_text())
    assert list(doc["methods"]) == ["rag", "mem0", "langmem"]
    assert all(doc["methods"][m]["overall"]["n"] == 5 for m in doc["methods"])
    assert "mem0:locomo-conv-e1" in doc["metadata"]["memory_construction"]
    assert "locomo-conv-e1" in doc["metadata"]["memory_construction"]  # the eval's own build is kept
    assert "| mem0 |" in (out / "summary.md").read_text()
    # and the eval still resumes in that folder (same backbone and judge in every row)
    run_eval(FIXTURE, ["rag"], out_dir=out, ctx=ctx, judge="none", show_progress=False, plots=False)
    assert len(rows_of(out)) == 15


def test_a_folder_judged_by_another_model_is_refused(tmp_path: Path, data_dir: str) -> None:
    out = run(tmp_path / "run", data_dir, peers=["mem0"])
    rows = rows_of(out)
    rows[0]["judge_model"] = "gpt-4o-mini"
    (out / JSONL_NAME).write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(EvalError, match="judge_model"):
        run(out, data_dir, peers=["mem0"])


def test_command_line_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(FIXTURE), "--peers", "zep", "--out", str(tmp_path / "o")]) == 2
    assert "unknown peer 'zep'" in capsys.readouterr().err
    assert main(["--data", str(tmp_path / "missing.json")]) == 2
