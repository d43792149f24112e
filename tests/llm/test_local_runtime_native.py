"""Which xllamacpp `recollect setup` installs for a CPU, and how a failed AVX-512 build falls back (no compile)."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import runtime_speed
from recollect.llm import local_runtime as lr
from recollect.llm import native_build as nb
from recollect.settings import Settings

BASE = "fpu sse avx avx2 fma f16c bmi2"
SKYLAKE = f"processor\t: 0\nflags\t\t: {BASE} avx512f avx512dq avx512cd avx512bw avx512vl\n"
SAPPHIRE = (f"processor\t: 0\nflags\t\t: {BASE} avx512f avx512dq avx512cd avx512bw avx512vl avx_vnni avx512_bf16 "
            "avx512vbmi avx512_vnni avx512_fp16 amx_bf16 amx_tile amx_int8\n")
AVX2_ONLY = f"processor\t: 0\nflags\t\t: {BASE}\n"


def args_for(choice: str, cpu: str) -> str | None:
    return nb.xllamacpp_cmake_args(choice, nb.cpu_flags(cpu))


def test_avx512_cpu_gets_its_own_extensions_and_never_amx() -> None:
    args = args_for("auto", SAPPHIRE)
    assert args is not None
    for on in ("GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_VBMI", "GGML_AVX512_BF16", "GGML_AVX2"):
        assert f"-D{on}=ON" in args.split()
    for off in ("GGML_NATIVE", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "LLAMA_LLGUIDANCE",
                "LLAMA_BUILD_BORINGSSL", "LLAMA_USE_PREBUILT_UI"):
        assert f"-D{off}=OFF" in args.split()


def test_avx512_without_vnni_leaves_the_extensions_off() -> None:
    args = args_for("auto", SKYLAKE)
    assert args is not None and "-DGGML_AVX512=ON" in args
    assert all(f"-D{opt}=OFF" in args for _, opt in nb.EXTENSIONS)


@pytest.mark.parametrize(("choice", "cpu", "prebuilt"), [
    ("auto", AVX2_ONLY, True), ("avx2", SAPPHIRE, True), ("auto", SAPPHIRE, False), ("avx512", AVX2_ONLY, False),
])
def test_which_cpus_get_the_prebuilt_wheel(choice: str, cpu: str, prebuilt: bool) -> None:
    assert (args_for(choice, cpu) is None) == prebuilt


def test_wheel_cache_is_keyed_by_version_and_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nb, "cache_dir", lambda: tmp_path)
    a, b = args_for("auto", SAPPHIRE), args_for("auto", SKYLAKE)
    assert a and b and nb.wheel_dir(a) != nb.wheel_dir(b)
    assert nb.wheel_dir(a).name.startswith(f"xllamacpp-{nb.XLLAMACPP_VERSION}-")
    monkeypatch.setattr(lr, "cache_dir", lambda: tmp_path)
    assert nb.wheel_dir(a) != lr.wheel_dir(a)  # never mixed with llama-cpp-python's wheels
    assert lr.LocalModelError is nb.LocalModelError  # one error for every install step, wherever it is raised


# --------------------------------------------------------------------------------------------- ensure


class Setup:
    """A venv and a wheel cache in tmp_path: records pip calls, fakes the build."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpu: str, installed: Path | None = None,
                 **settings: Any) -> None:
        self.pip: list[tuple[str, ...]] = []
        self.builds = 0
        self.installed = installed  # where the venv's xllamacpp came from (None: PyPI)
        self.messages: list[str] = []
        self.cpu = nb.cpu_flags(cpu)
        monkeypatch.setattr(nb, "cache_dir", lambda: tmp_path)
        monkeypatch.setattr(nb, "run_pip", lambda *a: self.pip.append(a))
        monkeypatch.setattr(nb, "xllamacpp_installed", lambda: True)
        monkeypatch.setattr(nb, "installed_from", lambda: self.installed)
        monkeypatch.setattr(nb, "get_settings", lambda: Settings(**settings))
        monkeypatch.setattr(nb, "_check_import", lambda: None)

    def build_ok(self, args: str, echo: Any) -> Path:
        self.builds += 1
        wdir = nb.wheel_dir(args)
        wdir.mkdir(parents=True)
        wheel = wdir / f"xllamacpp-{nb.XLLAMACPP_VERSION}-cp310-abi3-linux_x86_64.whl"
        wheel.write_bytes(b"")
        return wheel

    def build_fails(self, args: str, echo: Any) -> Path:
        self.builds += 1
        raise nb.LocalModelError("compiling xllamacpp failed (exit 1)")

    def run(self, build: Any = None, choice: str | None = None) -> str:
        return nb.ensure_xllamacpp(self.messages.append, choice=choice, flags=self.cpu, build=build or self.build_ok)


def pip_installed(s: Setup) -> list[str]:
    return [a[-1] for a in s.pip if a[0] == "install"]


def test_avx2_cpu_installs_the_prebuilt_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = Setup(monkeypatch, tmp_path, AVX2_ONLY)
    assert s.run() == "prebuilt" and s.builds == 0
    assert s.pip == []  # already installed from PyPI: nothing to do
    assert "prebuilt, AVX2" in s.messages[-1]


def test_avx512_cpu_builds_once_and_installs_the_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = Setup(monkeypatch, tmp_path, SAPPHIRE)
    assert s.run() == "native" and s.builds == 1
    (wheel,) = pip_installed(s)
    assert Path(wheel).parent == nb.wheel_dir(args_for("auto", SAPPHIRE) or "") and "--force-reinstall" in s.pip[0]
    # next setup: the venv runs that wheel, so neither a build nor a pip call
    s.installed, s.pip = Path(wheel), []
    assert s.run() == "native" and s.builds == 1 and s.pip == []
    # a fresh venv with the wheel cached: installed from the cache, no build
    s.installed = None
    assert s.run() == "native" and s.builds == 1 and pip_installed(s) == [wheel]


def test_failed_build_falls_back_to_prebuilt_and_is_not_retried(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    s = Setup(monkeypatch, tmp_path, SAPPHIRE)
    monkeypatch.setattr(nb, "xllamacpp_installed", lambda: False)  # a fresh venv
    assert s.run(build=s.build_fails) == "prebuilt"
    assert pip_installed(s) == [f"xllamacpp=={nb.XLLAMACPP_VERSION}"]
    assert any("falling back to the prebuilt AVX2 wheel" in m for m in s.messages)
    # build_wheel leaves this marker when the compiler fails; with it the next setup does not build again
    wdir = nb.wheel_dir(args_for("auto", SAPPHIRE) or "")
    wdir.mkdir(parents=True)
    (wdir / nb.FAILED).write_text("exit 1\n")
    assert s.run(build=s.build_fails) == "prebuilt" and s.builds == 1
    assert "earlier AVX-512 build failed" in s.messages[-1]


@pytest.mark.parametrize("settings", [{"local_cpu_flags": "avx2"}, {"local_json_whitespace": "compact"}])
def test_settings_that_force_the_prebuilt_wheel_replace_a_native_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings: dict[str, str]) -> None:
    s = Setup(monkeypatch, tmp_path, SAPPHIRE, installed=tmp_path / "wheels" / "x" / "xllamacpp.whl", **settings)
    assert s.run() == "prebuilt" and s.builds == 0
    # same version as the native wheel: without --force-reinstall pip would keep the native build
    assert pip_installed(s) == [f"xllamacpp=={nb.XLLAMACPP_VERSION}"] and "--force-reinstall" in s.pip[0]


def test_env_avx2_forces_prebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RECOLLECT_LOCAL_CPU_FLAGS", "avx2")
    s = Setup(monkeypatch, tmp_path, SAPPHIRE)
    monkeypatch.setattr(nb, "get_settings", Settings)  # read from the environment
    assert s.run() == "prebuilt" and s.builds == 0


def test_installed_from_reads_pips_direct_url(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    class Dist:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def read_text(self, name: str) -> str | None:
            return self.text if name == "direct_url.json" else None

    url = json.dumps({"url": "file:///root/.cache/recollect/wheels/xl%20v/xllamacpp-1-cp310-abi3-linux_x86_64.whl",
                      "archive_info": {}})
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist(url))
    assert nb.installed_from() == Path("/root/.cache/recollect/wheels/xl v/xllamacpp-1-cp310-abi3-linux_x86_64.whl")
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist(None))  # from PyPI
    assert nb.installed_from() is None


def test_llguidance_settings_refused_on_the_native_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nb, "get_settings", lambda: Settings(local_json_whitespace="compact"))
    monkeypatch.setattr(nb, "installed_from", lambda: tmp_path / "xllamacpp.whl")
    with pytest.raises(nb.LocalModelError, match="needs llguidance"):
        nb.check_json_whitespace()
    monkeypatch.setattr(nb, "installed_from", lambda: None)
    nb.check_json_whitespace()  # the prebuilt wheel has llguidance


# --------------------------------------------------------------------------------------------- build


class FakeBuild:
    """pip wheel's output stream, and (when ok) a wheel in its -w folder."""

    seen: dict[str, Any] = {}
    ok = True

    def __init__(self, cmd: list[str], env: dict[str, str], **kw: Any) -> None:
        FakeBuild.seen = {"cmd": cmd, "env": env}
        out = Path(cmd[cmd.index("-w") + 1])
        self.stdout = iter([f"[{p:3d}%] Building CXX object x{p}.o\n" for p in (0, 4, 12, 55, 100)])
        if FakeBuild.ok:
            (out / f"xllamacpp-{nb.XLLAMACPP_VERSION}-cp310-abi3-linux_x86_64.whl").write_bytes(b"")

    def wait(self) -> int:
        return 0 if FakeBuild.ok else 2


@pytest.mark.parametrize("ok", [True, False])
def test_build_wheel_streams_progress_and_caches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ok: bool) -> None:
    monkeypatch.setattr(nb, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(nb.subprocess, "Popen", FakeBuild)
    monkeypatch.setattr(nb.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    clock = iter(range(0, 10_000, 25))  # 25 s per look at the clock
    monkeypatch.setattr(nb.time, "monotonic", lambda: float(next(clock)))
    FakeBuild.ok = ok
    args = args_for("auto", SAPPHIRE) or ""
    echoed: list[str] = []
    if ok:
        wheel = nb.build_wheel(args, echoed.append)
        assert wheel.parent == nb.wheel_dir(args) and nb.cached_wheel(nb.wheel_dir(args)) == wheel
        assert (wheel.parent / "CMAKE_ARGS").read_text().strip() == args
    else:
        with pytest.raises(nb.LocalModelError, match="exit 2"):
            nb.build_wheel(args, echoed.append)
        assert (nb.wheel_dir(args) / nb.FAILED).is_file() and nb.cached_wheel(nb.wheel_dir(args)) is None
    assert "x100.o" in (tmp_path / "logs" / f"{nb.wheel_dir(args).name}-build.log").read_text()
    cmd, env = FakeBuild.seen["cmd"], FakeBuild.seen["env"]
    assert env["CMAKE_ARGS"] == args and env["XLLAMACPP_RELEASE"] == "1"
    assert cmd[cmd.index("--no-binary") + 1] == "xllamacpp" and f"xllamacpp=={nb.XLLAMACPP_VERSION}" in cmd
    # a line a minute at most, for CI logs that do not show the spinner
    progress = [m for m in echoed if m.startswith("  compiling xllamacpp")]
    assert progress == ["  compiling xllamacpp, 2 min: [ 12%] Building CXX object x12.o"]  # of 5 lines, 125 s


# --------------------------------------------------------------------------------------------- report


def test_runtime_speed_report() -> None:  # the report's arithmetic, from made-up measurements
    def rows(prefill: float, decode: float, long_s: float) -> dict[str, list[dict[str, float]]]:
        return {"prefill": [{"tps": prefill, "wall_tps": prefill - 5, "prompt_tokens": 1500},
                            {"tps": prefill - 10, "wall_tps": prefill - 15, "prompt_tokens": 1500}],
                "decode": [{"tps": decode}, {"tps": decode - 1}],
                "long": [{"wall_s": long_s, "prompt_tokens": 4000}, {"wall_s": long_s + 3, "prompt_tokens": 4000}]}

    raw = {"prebuilt": rows(80.0, 15.0, 60.0), "native": rows(120.0, 16.5, 40.0)}
    infos = {rt: {"system_info": f"CPU : {rt}", "module": "m", "served_by": "so"} for rt in runtime_speed.RUNTIMES}
    native = {"dir": "d", "wheel": "w", "cmake_args": "-DGGML_AVX512=ON", "build_seconds": 1200}
    replies = {"prebuilt": ["abc", "same"], "native": ["abd", "same"]}
    raw["native"]["decode"][0]["foreign"] = 0.04  # other processes' share of the cores during it
    pauses = [{"paused_s": 80.0, "overran": False, "reniced": True}]
    a = Namespace(repeats=2, decode_tokens=256, nice=-20, max_foreign_busy=0.1, tries=3)
    rep = runtime_speed.build_report(a, native, infos, raw, pauses, replies)
    assert rep["limits"]["native"]["prefill_tps"] == 120.0 and rep["limits"]["prebuilt"]["long_call_s"] == 60.0
    assert rep["speedup_native_over_prebuilt"] == {"prefill": 1.5, "decode": 1.1, "long_call": 1.5}
    assert rep["greedy_agreement"]["identical"] == 1
    assert rep["greedy_agreement"]["chars_before_first_difference"] == [2, 4]
    md = runtime_speed.markdown(rep)
    assert "| native | 120.0 | 115.0 | 16.5 | 40.0 |" in md and "build: 20.0 min" in md and "1.5×" in md
    assert "Timing phases (s): 80.0; our servers' priority raised during them: True." in md
    assert "during a kept measurement: at most 4% (a measurement is repeated when it is above 10%" in md


def test_build_without_a_compiler_fails_fast_and_can_be_retried(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setattr(nb, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(nb.shutil, "which", lambda tool: None if tool == "cmake" else f"/usr/bin/{tool}")
    args = args_for("auto", SAPPHIRE) or ""
    with pytest.raises(nb.LocalModelError, match="needs cmake"):
        nb.build_wheel(args)
    assert not (nb.wheel_dir(args) / nb.FAILED).exists()


def test_foreign_share_subtracts_our_servers() -> None:
    # 200 ticks of both cores: 150 busy, 100 of them our servers' -> others used 25%
    assert runtime_speed.foreign_share((1000, 5000, 300), (1150, 5200, 400)) == 0.25
    assert runtime_speed.foreign_share((0, 0, 0), (10, 100, 20)) == 0.0  # never below zero


def test_a_native_wheel_that_does_not_load_is_replaced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = Setup(monkeypatch, tmp_path, SAPPHIRE)

    def broken() -> None:
        raise nb.LocalModelError("the installed xllamacpp does not load as an AVX-512 build")

    monkeypatch.setattr(nb, "_check_import", broken)
    assert s.run() == "prebuilt"
    assert pip_installed(s)[-1] == f"xllamacpp=={nb.XLLAMACPP_VERSION}" and "--force-reinstall" in s.pip[-1]
