"""The embedded runtime's choices: which server runs, with which CPU flags, and what the speed report computes."""

from __future__ import annotations

import json
import os
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import speed
from recollect.llm import local_runtime as lr
from recollect.llm import xllamacpp_server
from recollect.llm.structured import measure_call
from recollect.llm.usage import merge_usage
from recollect.settings import Settings, get_settings

AVX512_CPU = "processor\t: 0\nflags\t\t: fpu sse avx avx2 fma f16c bmi2 avx512f avx512dq avx512cd avx512bw avx512vl\n"
AVX2_CPU = "processor\t: 0\nflags\t\t: fpu sse avx avx2 fma f16c bmi2\n"


def test_cpu_flags_read_from_cpuinfo() -> None:
    assert {"avx512f", "avx512bw"} <= lr.cpu_flags(AVX512_CPU)
    assert "avx512f" not in lr.cpu_flags(AVX2_CPU)
    assert lr.cpu_flags("no flags line") == frozenset()


@pytest.mark.parametrize(("choice", "cpu", "expected"), [
    ("auto", AVX512_CPU, lr.CMAKE_ARGS_AVX512),
    ("auto", AVX2_CPU, lr.CMAKE_ARGS_AVX2),
    ("avx2", AVX512_CPU, lr.CMAKE_ARGS_AVX2),
    ("avx512", AVX2_CPU, lr.CMAKE_ARGS_AVX512),
])
def test_cmake_args_follow_the_cpu(choice: str, cpu: str, expected: str) -> None:
    assert lr.cmake_args(choice, lr.cpu_flags(cpu)) == expected


def test_no_build_ever_asks_for_the_native_path() -> None:
    for args in (lr.CMAKE_ARGS_AVX2, lr.CMAKE_ARGS_AVX512):
        assert "-DGGML_NATIVE=OFF" in args and "AMX" not in args


def test_each_build_has_its_own_wheel_folder() -> None:
    assert lr.wheel_dir(lr.CMAKE_ARGS_AVX2) != lr.wheel_dir(lr.CMAKE_ARGS_AVX512)


def test_server_command_per_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lr, "get_settings", lambda: Settings(local_parallel=2, local_cache_ram_mib=512))
    xs = lr.LocalServer(runtime="xllamacpp")._server_args()
    assert xs[0] == "recollect.llm.xllamacpp_server"
    assert xs[xs.index("--parallel") + 1] == "2" and xs[xs.index("--cache-ram-mib") + 1] == "512"
    old = lr.LocalServer(runtime="llama-cpp-python")._server_args()
    assert old[0] == "llama_cpp.server" and "--n_threads_batch" in old


def test_default_runtime_is_the_prebuilt_server() -> None:
    assert Settings().local_runtime == "xllamacpp"
    assert lr.LocalServer().runtime == get_settings().local_runtime


def test_xllamacpp_params_share_the_context_across_slots() -> None:
    pytest.importorskip("xllamacpp")
    args = xllamacpp_server.parse_args(["--model", "m.gguf", "--alias", "qwen", "--port", "1234", "--parallel", "2",
                                        "--n-ctx", "4096", "--cache-ram-mib", "256"])
    p = xllamacpp_server.build_params(args)
    assert (p.n_parallel, p.n_ctx, p.kv_unified, p.cache_ram_mib, p.port) == (2, 8192, True, 256, 1234)
    assert p.model_alias == {"qwen"} and p.hostnames == ["127.0.0.1"] and p.cache_prompt


def test_cached_prompt_tokens_are_counted() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    msg = AIMessage(content="ok", usage_metadata={"input_tokens": 100, "output_tokens": 2, "total_tokens": 102,
                                                  "input_token_details": {"cache_read": 80}})
    rec = measure_call("answer", [HumanMessage(content="q")], msg, 0.5)
    assert rec["cached_tokens"] == 80 and rec["by_node"]["answer"]["cached_tokens"] == 80
    assert merge_usage(rec, rec)["cached_tokens"] == 160


# --------------------------------------------------------------------------------------------- speed report


def _phase(tmp: Path, name: str, wall: dict[str, float], ingest_s: float, prefill: float,
           commit: str = "0123456789abcdef") -> Path:
    pdir = tmp / name
    (pdir / "eval").mkdir(parents=True)
    (pdir / "limits.json").write_text(json.dumps({"prefill_tps": prefill, "decode_tps": 20.0}))
    methods = {m: {"overall": {"wall_time_s": {"mean": s}, "locomo_f1": 0.5, "prompt_tokens": 1000.0,
                               "completion_tokens": 40.0, "n_llm_calls": 1.0}} for m, s in wall.items()}
    built = [{"method": "mragent", "sessions": 2, "seconds": ingest_s, "completion_tokens": 900,
              "prompt_tokens": 3000, "llm_calls": 4}]
    summary = {"methods": methods, "metadata": {"question_counts": {"n_questions": 2}, "git_commit": commit,
                                                "date": f"2026-11-23T{len(name):02d}:00:00+00:00",
                                                "memory_construction": {"ns": {"built": built}}}}
    (pdir / "eval" / "summary.json").write_text(json.dumps(summary))
    rows = [{"method": m, "cached_tokens": 300} for m in wall] * 2
    (pdir / "eval" / "per_question.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return pdir


def test_speed_report_from_two_phases(tmp_path: Path) -> None:
    before = speed.collect(_phase(tmp_path, "before", {"rag": 40.0, "memr3": 160.0}, 600.0, 50.0))
    after = speed.collect(_phase(tmp_path, "after", {"rag": 10.0, "memr3": 80.0}, 150.0, 100.0, "fedcba9876543210"))
    rep = speed.build_report(before, after, Namespace(methods=["rag", "memr3"], conversation="c", sessions=2))
    rag = rep["per_question"]["rag"]
    assert rag["speedup"] == 4.0 and rag["cached_tokens"] == 300
    assert rag["limit_s"] == 12.0 and rag["limit_before_s"] == 22.0  # 1000/100 + 40/20; 1000/50 + 40/20
    assert rep["geomean_speedup_per_question"] == pytest.approx(2.83, abs=0.01)  # sqrt(4 * 2)
    assert rep["ingest_per_session"]["mragent"] == {"before_s": 300.0, "after_s": 75.0, "speedup": 4.0,
                                                    "completion_tokens_before": 900, "completion_tokens_after": 900}
    md = speed.markdown(rep)
    assert "| rag | 40.0 | 10.0 | 4.0× |" in md and "2.83×" in md
    # each phase says when and at which commit it ran (a resumed report may combine two runs)
    assert "The before phase ran on 2026-11-23T06:00:00+00:00 at commit 0123456789ab." in md
    assert "The after phase ran on 2026-11-23T05:00:00+00:00 at commit fedcba987654." in md


@pytest.mark.parametrize("extra", [{}, {"PYTHONPATH": "/opt/other-xllamacpp"}])
def test_extra_env_reaches_the_server_process_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                   extra: dict[str, str]) -> None:
    seen: dict[str, Any] = {}

    class Exited:
        returncode, pid = 1, 0

        def __init__(self, cmd: list[str], **kw: Any) -> None:
            seen.update(kw)

        def poll(self) -> int:
            return 1

    monkeypatch.setattr(lr, "runtime_installed", lambda *a: True)
    monkeypatch.setattr(lr, "model_verified", lambda *a: True)
    monkeypatch.setattr(lr, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(lr.subprocess, "Popen", Exited)
    srv = lr.LocalServer(runtime="xllamacpp", extra_env=extra)
    with pytest.raises(lr.LocalModelError, match="exited with 1"):
        srv.start()
    srv.stop()
    if extra:
        assert seen["env"]["PYTHONPATH"] == "/opt/other-xllamacpp" and seen["env"]["PATH"] == os.environ["PATH"]
        assert os.environ.get("PYTHONPATH") != "/opt/other-xllamacpp"
    else:
        assert seen["env"] is None  # inherits this process's environment
