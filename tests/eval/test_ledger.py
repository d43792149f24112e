"""Committed eval rows: fingerprints, text-free rows, reuse, carry-over by tape replay, plan and time budget."""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recollect.eval import fingerprint as fpmod
from recollect.eval import ledger_run
from recollect.eval.estimate import parse_duration
from recollect.eval.fingerprint import (
    builder_fingerprint,
    graph_fingerprint,
    is_method_settings,
    module_closure,
)
from recollect.eval.ledger import (
    BUILD_FIELDS,
    BUILDS_NAME,
    LEDGER_FIELDS,
    check_text_free,
    ledger_row,
    read_ledger,
)
from recollect.eval.plan import EvalError
from recollect.eval.runner import run_eval
from recollect.eval.tape import uninstall
from recollect.graphs.registry import METHODS, AllMethodsContext
from recollect.settings import get_settings
from tests.service.scripted_endpoint import ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "eval_mini_locomo.json"
COMMITTED = [ROOT / "benchmarks" / "reports" / name / "rows" for name in ("eval_decisive", "peers_slice")]
# every other committed rows folder (the speed report's) is checked the same way once it exists
COMMITTED += sorted(f for f in (ROOT / "benchmarks" / "reports").glob("*/rows") if f not in COMMITTED)
DATASET = Path("/work/shared/data/locomo/locomo_dev.json")


# --------------------------------------------------------------------------------------------- fingerprints


def _fingerprints(ctx: AllMethodsContext) -> dict[str, str]:
    return {m: graph_fingerprint(m, ctx).digest for m in METHODS}


def _edit(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Pretend `module`'s source changed: its file digest differs from now on."""
    path = fpmod._origin(module)
    assert path is not None
    real, real_code = fpmod._sha256, fpmod._code_digest
    monkeypatch.setattr(fpmod, "_sha256", lambda p: real(p) + ("-edited" if p == path else ""))
    monkeypatch.setattr(fpmod, "_code_digest", lambda p: real_code(p) + ("-edited" if p == path else ""))


def test_a_method_module_changes_only_its_own_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = AllMethodsContext()
    before = _fingerprints(ctx)
    assert len(set(before.values())) == len(METHODS)  # rag and full_context share code, not a fingerprint
    _edit(monkeypatch, "recollect.graphs.memr3.router")
    after = _fingerprints(ctx)
    assert [m for m in METHODS if before[m] != after[m]] == ["memr3"]


def test_a_shared_module_changes_every_graph_that_imports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = AllMethodsContext()
    before = _fingerprints(ctx)
    importers = {m for m in METHODS if "recollect.budget" in module_closure(fpmod._graph_roots(m))}
    assert len(importers) >= 4
    _edit(monkeypatch, "recollect.budget")
    after = _fingerprints(ctx)
    assert {m for m in METHODS if before[m] != after[m]} == importers


@pytest.mark.parametrize("module", sorted(fpmod.STORAGE_MODULES))
def test_a_storage_module_changes_no_fingerprint_and_the_earlier_digest_stays_accepted(
        monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """A storage fix keeps every graph's and builder's digest; the digest counting storage code (the scheme rows
    were made under until then) changes, and is still accepted until a run copies the rows."""
    ctx = AllMethodsContext()
    assert all(module in module_closure(fpmod._graph_roots(m)) for m in METHODS)  # followed, not digested
    before = {m: graph_fingerprint(m, ctx) for m in METHODS}
    memr3_memory = fpmod.builder_fingerprint("memr3", ctx)
    _edit(monkeypatch, module)
    after = {m: graph_fingerprint(m, ctx) for m in METHODS}
    assert all(after[m].digest == before[m].digest for m in METHODS)
    assert all(after[m].earlier[0] != before[m].earlier[0] and after[m].digest in after[m].accepted for m in METHODS)
    assert fpmod.builder_fingerprint("memr3", ctx).digest == memr3_memory.digest


def test_a_memory_built_under_an_earlier_digest_is_found(tmp_path: Path) -> None:
    fp = fpmod.Fingerprint("a" * 64, {}, earlier=("b" * 64, "c" * 64))
    assert fpmod.memory_dir("hymem", fp, tmp_path) == tmp_path / "eval_memory" / f"hymem-{'a' * 16}"
    (tmp_path / "eval_memory" / f"hymem-{'c' * 16}").mkdir(parents=True)
    assert fpmod.memory_dir("hymem", fp, tmp_path) == tmp_path / "eval_memory" / f"hymem-{'c' * 16}"
    (tmp_path / "eval_memory" / f"hymem-{'a' * 16}").mkdir()
    assert fpmod.memory_dir("hymem", fp, tmp_path) == tmp_path / "eval_memory" / f"hymem-{'a' * 16}"


def test_settings_prompts_and_model_are_in_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = AllMethodsContext()
    base = graph_fingerprint("hymem", ctx)
    assert graph_fingerprint("hymem", ctx.with_overrides(hymem_light_k=base_k(ctx) + 1)).digest != base.digest
    assert graph_fingerprint("hymem", ctx.with_overrides(profile="paper")).digest != base.digest
    # where data lives and which namespace is read are not behaviour
    assert graph_fingerprint("hymem", ctx.with_overrides(data_dir="/elsewhere")).digest == base.digest
    assert graph_fingerprint("rag", ctx).digest == graph_fingerprint("rag", ctx.with_overrides(hymem_light_k=9)).digest
    prompts = {k for k in base.parts if k.startswith("prompt:")}
    assert "prompt:hymem/light.md" in prompts and "prompt:common/retry.md" in prompts
    assert not any(k.startswith("prompt:memr3/") for k in prompts)
    assert base.parts["model"].startswith(("gguf-sha256:", "endpoint:"))
    monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RECOLLECT_LLM_MODEL", "other-model")
    get_settings.cache_clear()
    try:
        assert graph_fingerprint("hymem", ctx).digest != base.digest
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def base_k(ctx: AllMethodsContext) -> int:
    return int(ctx.hymem_light_k)


def test_a_builder_fingerprint_follows_the_settings_its_code_reads() -> None:
    ctx = AllMethodsContext()
    chunks = builder_fingerprint("memr3", ctx).digest
    assert builder_fingerprint("memr3", ctx.with_overrides(memr3_chunk_tokens=77)).digest != chunks
    assert builder_fingerprint("memr3", ctx.with_overrides(memr3_max_iterations=9)).digest == chunks
    assert builder_fingerprint("turns", ctx).digest != chunks


def test_a_builder_fingerprint_covers_its_modules_and_no_settings_module() -> None:
    """The registry imports every method's settings; a builder found through it does not depend on them, so a
    setting added to MRAgent leaves MGRetrieval's memory where it is. Its own settings module counts by the
    values the build reads, not by its text: a question-time setting added there leaves the memory too."""
    ctx = AllMethodsContext()
    modules = {k.removeprefix("module:") for k in builder_fingerprint("mgretrieval", ctx).parts if k.startswith("module:")}
    assert "recollect.graphs.mgretrieval.memory" in modules and "recollect.ingestion" in modules
    assert not {"recollect.graphs.registry", "recollect.graphs.mgretrieval.settings", "recollect.graphs.mragent.settings",
                "recollect.graphs.hymem.settings"} & modules
    built = builder_fingerprint("mgretrieval", ctx).digest
    assert builder_fingerprint("mgretrieval", ctx.with_overrides(mg_max_rounds=9)).digest == built  # question time
    assert builder_fingerprint("mgretrieval", ctx.with_overrides(mg_keywords_per_memory=3)).digest != built  # ingest


def test_method_settings_modules_only_declare_settings() -> None:
    """What lets a builder's fingerprint leave its settings module's text out: nothing there but imports and the
    settings classes (a function or a constant there could change a build without changing a value)."""
    folders = [p for p in (ROOT / "graphs").iterdir() if (p / "settings.py").is_file()]
    assert len(folders) >= 5
    for folder in folders:
        tree = ast.parse((folder / "settings.py").read_text())
        for i, node in enumerate(tree.body):
            docstring = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            assert docstring or isinstance(node, ast.Import | ast.ImportFrom | ast.ClassDef), (
                f"graphs/{folder.name}/settings.py line {node.lineno}: only imports and settings classes belong here")
        assert is_method_settings(f"recollect.graphs.{folder.name}.settings")


# --------------------------------------------------------------------------------------------- text-free rows


def test_a_ledger_row_holds_no_text() -> None:
    row = {k: None for k in ("method", "question_id", "code_commit")}
    row.update(method="rag", question_id="conv-1#3", prediction="a long answer about a trip to the coast",
               question="Where did she go last summer with her family?", draft_answer="the coast",
               error="ValueError: the answer 'she went to the coast' is bad", evidence_stages={"D1:3": "shown"})
    out = ledger_row(row, row["question"], "f" * 64, {"runtime": "endpoint"})
    check_text_free(out)
    assert set(out) == set(LEDGER_FIELDS) and out["error"] == "ValueError"
    assert "coast" not in json.dumps(out) and "summer" not in json.dumps(out)
    with pytest.raises(ValueError, match="free text"):
        check_text_free({**out, "judge_label": "she went to the coast"})
    with pytest.raises(ValueError, match="not ledger fields"):
        check_text_free({**out, "prediction": "x"})


def _five_grams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + 5]) for i in range(len(words) - 4)}


def _dataset_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _dataset_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _dataset_strings(v)


def test_committed_rows_hold_no_dataset_text() -> None:
    files = sorted(f for folder in COMMITTED for f in folder.glob("*.jsonl"))
    assert all(any(folder.glob("*.jsonl")) for folder in COMMITTED), f"no committed rows in one of {COMMITTED}"
    for f in files:
        fields = BUILD_FIELDS if f.name == BUILDS_NAME else LEDGER_FIELDS
        for line in f.read_text(encoding="utf-8").splitlines():
            check_text_free(json.loads(line), fields)
    if not DATASET.is_file():  # the dev split is not part of the repository; the structural check above stands
        pytest.skip(f"{DATASET} is not on this machine")
    grams: set[tuple[str, ...]] = set()
    for text in _dataset_strings(json.loads(DATASET.read_text(encoding="utf-8"))):
        grams |= _five_grams(text)
    reports = [md for folder in COMMITTED for md in folder.parent.glob("*.md")]
    committed = "\n".join(f.read_text(encoding="utf-8") for f in [*files, *reports])
    leaked = _five_grams(committed) & grams
    assert not leaked, f"dataset text in committed rows: {sorted(leaked)[:3]}"


CODE = '''"""A module."""
from recollect.settings import setting


class S:
    """Settings."""

    # why 3
    k: int = setting(3, "how many", paper=5)

    @property
    def twice(self) -> int:
        return 2 * self.k
'''


@pytest.mark.parametrize(("change", "same"), [
    (lambda t: t.replace("# why 3", "# why 3, measured on 120 questions\n    # and more"), True),
    (lambda t: t.replace("\n\n\nclass", "\n\nclass").replace("2 * self.k", "2*self.k"), True),
    (lambda t: t.replace('setting(3, "how many", paper=5)', 'setting(4, "how many of them")'), True),
    (lambda t: t.replace('"""Settings."""', '"""The settings."""'), False),  # a schema's docstring is sent
    (lambda t: t.replace("2 * self.k", "3 * self.k"), False),
    (lambda t: t.replace("k: int", "k: float"), False),
])
def test_the_code_digest_follows_code_not_text(tmp_path: Path, change: Any, same: bool) -> None:
    """Comments and layout leave a module's digest (and the rows of its graphs) as they are; so does a
    setting's default, which the resolved settings count by value; docstrings and code do not."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(CODE)
    b.write_text(change(CODE))
    assert b.read_text() != CODE
    assert (fpmod._code_digest(a) == fpmod._code_digest(b)) is same
    assert fpmod._sha256(a) != fpmod._sha256(b)


# --------------------------------------------------------------------------------------------- runs


@pytest.fixture
def scripted_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A scripted OpenAI-compatible endpoint as the configured model, and a private cache directory."""
    with ScriptedEndpoint() as url:
        monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", url)
        monkeypatch.setenv("RECOLLECT_LLM_MODEL", "scripted")
        monkeypatch.setenv("RECOLLECT_LLM_MAX_RETRIES", "0")
        monkeypatch.setenv("RECOLLECT_CACHE_DIR", str(tmp_path / "cache"))
        get_settings.cache_clear()
        uninstall()
        try:
            yield url
        finally:
            uninstall()
            monkeypatch.undo()
            get_settings.cache_clear()


def _run(tmp: Path, **kw: Any) -> Path:
    ctx = AllMethodsContext(data_dir=str(tmp / "d"))
    return run_eval(MINI, methods=["rag", "full_context"], judge="none", out_dir=tmp / "out", ctx=ctx,
                    rows_dir=tmp / "rows", show_progress=False, plots=False, **kw)


def test_rows_are_reused_then_carried_over_by_replay(scripted_env: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path)
    first = read_ledger(tmp_path / "rows")
    assert len(first) == 10 and all(not r["carried_over"] for r in first)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metadata"]["ledger"]["graphs"]["rag"]["computed_now"] == 5
    assert not summary["metadata"]["ledger"]["partial"]

    capsys.readouterr()
    _run(tmp_path, plan_only=True)
    assert re.search(r"^rag\s+\w+\s+5\s+0\s+0", capsys.readouterr().out, re.M)

    # a row whose graph raised is not current: the plan asks it again
    errored = {**next(r for r in first if r["method"] == "full_context"), "error": "RuntimeError"}
    with (tmp_path / "rows" / "full_context.jsonl").open("a") as fh:
        fh.write(json.dumps(errored) + "\n")
    _run(tmp_path, plan_only=True)
    assert re.search(r"^full_context\s+\w+\s+4\s+0\s+1", capsys.readouterr().out, re.M)
    _run(tmp_path)
    assert not any(r["error"] for r in read_ledger(tmp_path / "rows"))
    capsys.readouterr()

    # A refactor: rag's fingerprint changes, its requests do not. The endpoint is gone, so only the tape answers.
    real = ledger_run.graph_fingerprint
    monkeypatch.setattr(ledger_run, "graph_fingerprint", lambda m, c: fpmod.Fingerprint(
        real(m, c).digest[::-1] if m == "rag" else real(m, c).digest, {}))
    monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    get_settings.cache_clear()
    out = _run(tmp_path)
    meta = json.loads((out / "summary.json").read_text())["metadata"]["ledger"]["graphs"]
    assert meta["rag"]["carried_over_now"] == 5 and meta["rag"]["computed_now"] == 0
    assert meta["full_context"]["reused"] == 5
    rag = [r for r in read_ledger(tmp_path / "rows", ["rag"]) if r["carried_over"]]
    assert len(rag) == 5
    evidence = rag[0]["carried_over"][0]
    assert evidence["missed_requests"] == 0 and evidence["replayed_requests"] >= 1
    old = {r["question_id"]: r for r in first if r["method"] == "rag"}
    assert all(r["wall_time_s"] == old[r["question_id"]]["wall_time_s"] for r in rag)  # measured numbers kept


def test_rows_at_the_legacy_fingerprint_stay_current(scripted_env: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Rows made under the byte-digest scheme (before 2026-11-29) are current while that digest still matches,
    and a run copies them under the code digest."""
    _run(tmp_path)
    made = {r["fingerprint"] for r in read_ledger(tmp_path / "rows", ["rag"])}
    real = ledger_run.graph_fingerprint
    monkeypatch.setattr(ledger_run, "graph_fingerprint", lambda m, c: fpmod.Fingerprint(
        "new" + real(m, c).digest[3:], {}, earlier=(real(m, c).digest,)))
    capsys.readouterr()
    _run(tmp_path, plan_only=True)
    assert re.search(r"^rag\s+new\w+\s+5\s+0\s+0", capsys.readouterr().out, re.M)
    out = _run(tmp_path)
    meta = json.loads((out / "summary.json").read_text())["metadata"]["ledger"]["graphs"]["rag"]
    assert meta["reused"] == 5 and meta["rows"] == 5 and meta["computed_now"] == 0
    # the run copied them under the code digest (nothing asked): a comment edited later changes the legacy
    # digest only, and the copies stay current
    rows = read_ledger(tmp_path / "rows", ["rag"])
    copies = [r for r in rows if r["fingerprint"].startswith("new")]
    assert len(copies) == 5 and all(r["carried_over"][-1]["from"] in made for r in copies)
    assert all(r["carried_over"][-1]["same_source"] for r in copies)
    monkeypatch.setattr(ledger_run, "graph_fingerprint", lambda m, c: fpmod.Fingerprint(
        "new" + real(m, c).digest[3:], {}, earlier=("edited",)))
    capsys.readouterr()
    _run(tmp_path, plan_only=True)
    assert re.search(r"^rag\s+new\w+\s+5\s+0\s+0", capsys.readouterr().out, re.M)


def test_a_changed_request_is_computed_not_carried(scripted_env: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _run(tmp_path)
    # A different rag_top_k changes rag's fingerprint and what its prompt shows: the tape cannot answer.
    ctx = AllMethodsContext(data_dir=str(tmp_path / "d"), rag_top_k=1)
    out = run_eval(MINI, methods=["rag"], judge="none", out_dir=tmp_path / "out2", ctx=ctx,
                   rows_dir=tmp_path / "rows", show_progress=False, plots=False)
    meta = json.loads((out / "summary.json").read_text())["metadata"]["ledger"]["graphs"]["rag"]
    assert meta["computed_now"] + meta["carried_over_now"] == 5
    assert meta["carry_failed"] == meta["computed_now"] >= 1


def test_time_budget_stops_early_and_a_rerun_continues(scripted_env: str, tmp_path: Path) -> None:
    out = _run(tmp_path, time_budget_s=1.0)  # the estimate of one question (seconds) does not fit
    doc = json.loads((out / "summary.json").read_text())
    assert doc["metadata"]["ledger"]["partial"] is True
    assert read_ledger(tmp_path / "rows") == []
    assert "Partial" in (out / "summary.md").read_text()
    _run(tmp_path)
    assert len(read_ledger(tmp_path / "rows")) == 10


def test_plan_options_need_rows(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="--rows"):
        run_eval(MINI, methods=["rag"], judge="none", out_dir=tmp_path / "o", plan_only=True,
                 ctx=AllMethodsContext(data_dir=str(tmp_path / "d")))


@pytest.mark.parametrize(("text", "seconds"), [("140m", 8400), ("2h", 7200), ("1h30m", 5400), ("90s", 90),
                                               ("45", 2700)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5x", "0m", "1h banana"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="time-budget"):
        parse_duration(text)


def test_the_carried_row_is_the_one_the_replay_reproduces(scripted_env: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph may hold rows of several older fingerprints for a question (a setting tried and dropped): the
    newest of them is not the one to carry when the replay reproduces an older one's answer and counts."""
    _run(tmp_path)
    first = [r for r in read_ledger(tmp_path / "rows", ["rag"])]
    tried = [{**r, "fingerprint": "tried" + r["fingerprint"][5:], "answer_digest": "0" * 64,
              "n_llm_calls": 3, "wall_time_s": 999.0} for r in first]
    with (tmp_path / "rows" / "rag.jsonl").open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in tried)
    real = ledger_run.graph_fingerprint
    monkeypatch.setattr(ledger_run, "graph_fingerprint", lambda m, c: fpmod.Fingerprint(
        real(m, c).digest[::-1] if m == "rag" else real(m, c).digest, {}))
    monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # only the tape answers
    get_settings.cache_clear()
    out = _run(tmp_path)
    meta = json.loads((out / "summary.json").read_text())["metadata"]["ledger"]["graphs"]["rag"]
    assert meta["carried_over_now"] == 5 and meta["carry_failed"] == 0
    carried_rows = [r for r in read_ledger(tmp_path / "rows", ["rag"]) if r["carried_over"]]
    assert {r["carried_over"][-1]["from"] for r in carried_rows} == {first[0]["fingerprint"]}
    assert all(r["wall_time_s"] != 999.0 for r in carried_rows)


def test_same_answer_and_counts() -> None:
    old = {"answer_digest": ledger_run.digest("Pixel"), "n_llm_calls": 2, "prompt_tokens": 900, "completion_tokens": 40}
    assert ledger_run.same_answer_and_counts({"prediction": "Pixel", "n_llm_calls": 2, "prompt_tokens": 900,
                                              "completion_tokens": 40}, old)
    assert not ledger_run.same_answer_and_counts({"prediction": "Pixel", "n_llm_calls": 3, "prompt_tokens": 900,
                                                  "completion_tokens": 40}, old)
    assert not ledger_run.same_answer_and_counts({"prediction": "Rex", "n_llm_calls": 2}, old)


def test_a_question_too_long_to_compute_does_not_stop_later_carry_overs(scripted_env: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a budget that fits replays but no computed question, a question the tape cannot answer is
    skipped and the next ones are still carried over."""
    _run(tmp_path)
    rows = read_ledger(tmp_path / "rows", ["rag"])
    first = rows[0]["question_id"]
    # the first question's stale row gives another answer: its replay proves nothing, so it would be computed
    lines = [json.dumps({**r, "answer_digest": "0" * 64} if r["question_id"] == first else r) + "\n" for r in rows]
    (tmp_path / "rows" / "rag.jsonl").write_text("".join(lines))
    real = ledger_run.graph_fingerprint
    monkeypatch.setattr(ledger_run, "graph_fingerprint", lambda m, c: fpmod.Fingerprint(
        real(m, c).digest[::-1] if m == "rag" else real(m, c).digest, {}))
    monkeypatch.setattr(ledger_run.estimate, "seconds_per_question", lambda method, ledger: 3600.0)
    out = run_eval(MINI, methods=["rag"], judge="none", out_dir=tmp_path / "out2",
                   ctx=AllMethodsContext(data_dir=str(tmp_path / "d")), rows_dir=tmp_path / "rows",
                   show_progress=False, plots=False, time_budget_s=120.0)
    meta = json.loads((out / "summary.json").read_text())["metadata"]["ledger"]
    assert meta["graphs"]["rag"]["carry_failed"] == 1 and meta["graphs"]["rag"]["carried_over_now"] == 4
    assert meta["graphs"]["rag"]["computed_now"] == 0 and meta["partial"] is True


def test_reuse_replies_takes_taped_requests_and_asks_only_new_ones(scripted_env: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """--reuse-replies: a computed question's requests on the tape are answered from it (the endpoint is
    gone here, so only the tape can answer); without it they reach the model and fail."""
    _run(tmp_path)
    shutil.rmtree(tmp_path / "rows")  # nothing to reuse or carry: every row is computed again
    monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    get_settings.cache_clear()
    ctx = AllMethodsContext(data_dir=str(tmp_path / "d"))
    run_eval(MINI, methods=["rag"], judge="none", out_dir=tmp_path / "out2", ctx=ctx, rows_dir=tmp_path / "rows",
             show_progress=False, plots=False, reuse_replies=True)
    rows = read_ledger(tmp_path / "rows", ["rag"])
    assert len(rows) == 5 and not any(r["error"] for r in rows) and not any(r["carried_over"] for r in rows)
    assert all(r["provenance"]["tape_served_requests"] >= 1 for r in rows)
    shutil.rmtree(tmp_path / "rows")
    run_eval(MINI, methods=["rag"], judge="none", out_dir=tmp_path / "out3", ctx=ctx, rows_dir=tmp_path / "rows",
             show_progress=False, plots=False)
    assert all(r["error"] for r in read_ledger(tmp_path / "rows", ["rag"]))


def test_served_seconds_are_the_taped_server_time(tmp_path: Path) -> None:
    from recollect.eval.tape import TapeStore

    store = TapeStore(tmp_path / "tapes")
    store.replies = {"a": {"reply": json.dumps({"timings": {"prompt_ms": 1500.0, "predicted_ms": 500.0}})},
                     "b": {"reply": json.dumps({"choices": []})}}
    assert store.served_seconds(["a", "b", "a"]) == 4.0
